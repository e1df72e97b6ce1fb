"""What an external data reference must say for loading to read it, checked before any read.

A tensor's `external_data` entries name a file in the model's folder (`location`) and a
range of it (`offset`, `length`). onnx (1.19 and 1.23 were run) and onnxruntime (1.32)
refuse different references; ge refuses what either refuses, but a hard-linked data file
(onnx 1.23 refuses one, onnxruntime reads it, and so does ge: it is the file itself, not a
path out of the folder, and hard-linked copies of model folders are common):

- a location whose `..` climbs above the folder, even to come back into it
  (`../m/m.data`; onnx refuses it, onnxruntime reads it), or absolute, or empty;
- a location that passes through something that is not a folder, or does not exist
  (`sub/../m.data` without `sub`: onnxruntime cannot open it, onnx reads `m.data`);
- a symbolic link anywhere in it (onnx 1.23 refuses every link; onnxruntime and onnx 1.19
  follow one that stays in the folder); a link out of the folder is said as such;
- a location naming a folder, or anything but a regular file (a pipe would block a read);
- two `location` entries (onnxruntime refuses them; onnx reads the last);
- an `offset` or `length` that is not an integer in the digits 0-9 alone: `' 16'`, `'+16'`,
  `'1_6'`, full-width digits, `''` (onnxruntime refuses them; onnx reads most as Python's
  `int()` does).

Every refusal is `ExternalDataError` (GE1103) naming the tensor, the file and the problem.

A key beside `location`, `offset`, `length` and `checksum` (`basepath`, which onnx's own
`set_external_data` writes when given one, or any other) is read past: onnx ignores it (with
a warning for one it does not know), and ge's output never holds it (ge writes references
of its own). onnxruntime 1.32 refuses the whole model for it ("model format error!"), so
`ge inspect` notes it (`runtime_refused_keys`).
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from pathlib import Path

import onnx

from ge.errors import ExternalDataError

__all__ = ["RUNTIME_KEYS", "entry_int", "reference_entries", "resolve_location",
           "runtime_refused_keys"]

#: An integer as onnxruntime reads an external data entry: decimal digits alone (a `-` is
#: let through for the range check to say the offset is negative).
_INTEGER = re.compile(r"-?[0-9]+")


def reference_entries(tensor: onnx.TensorProto) -> dict[str, str]:
    """A tensor's external data entries by key (the last of a repeated `offset` or
    `length` counts, as onnx and onnxruntime read them); two `location` entries are
    refused."""
    entries: dict[str, str] = {}
    for entry in tensor.external_data:
        key = entry.key
        if key == "location" and key in entries:
            named = ", ".join(repr(e.value) for e in tensor.external_data if e.key == key)
            raise ExternalDataError(
                f"tensor {tensor.name!r} names more than one external data file ({named}): "
                "onnxruntime refuses a tensor with two 'location' entries (onnx reads the "
                "last)", path=entry.value)
        entries[key] = entry.value
    return entries


#: The external data keys onnxruntime (1.32) reads; it refuses a model whose tensor has
#: another ("model format error!"), where onnx ignores it.
RUNTIME_KEYS = frozenset({"location", "offset", "length", "checksum"})


def runtime_refused_keys(tensor: onnx.TensorProto) -> list[str]:
    """The keys of `tensor`'s external data entries that onnxruntime refuses (any but
    `RUNTIME_KEYS`), each once, in the order the model lists them."""
    return list(dict.fromkeys(e.key for e in tensor.external_data if e.key not in RUNTIME_KEYS))


def entry_int(tensor: onnx.TensorProto, entries: dict[str, str], key: str,
              path: Path) -> int | None:
    """The integer an external data entry records (`offset`, `length`), None when absent;
    GE1103 naming the tensor, the value and the file when it is not written as onnxruntime
    reads one (the digits 0-9, no space, sign, `_` or other digits)."""
    text = entries.get(key)
    if text is None:
        return None
    if _INTEGER.fullmatch(text):
        return int(text)
    try:
        lax = int(text)
    except ValueError:
        lax = None
    why = (": an empty entry, which onnxruntime refuses" if not text else
           f": onnxruntime refuses it (its integers are the digits 0-9 alone), onnx reads "
           f"it as {lax}" if lax is not None else "")
    raise ExternalDataError(f"tensor {tensor.name!r}: external data {key} {text!r} is not "
                            f"an integer (in {path.name}){why}", path=str(path))


def resolve_location(base_dir: Path, location: str, tensor_name: str) -> Path:
    """The data file `location` names in the model's folder `base_dir`, walked a name at
    a time as the system opens it (see the module's doc for what is refused)."""
    if not location:
        raise ExternalDataError(f"tensor {tensor_name!r} has external data without a location")
    if os.path.isabs(location) or Path(location).is_absolute():
        raise ExternalDataError(
            f"tensor {tensor_name!r}: external data location {location!r} is an absolute path; "
            "only files inside the model's folder are read",
            path=location,
        )
    base = base_dir.resolve()
    normal = os.path.normpath(location)
    if normal == os.pardir or normal.startswith(os.pardir + os.sep):
        _refuse_climbing(base, location, tensor_name)
    parts = location.replace(os.sep, "/").split("/")
    names_folder = parts[-1] in ("", os.curdir)  # (`m.data/`, `sub/.`, `.`: a folder)
    named = [i for i, part in enumerate(parts) if part not in ("", os.curdir)]
    current = base
    mode = os.lstat(base).st_mode
    for i in named:
        part = parts[i]
        current = current.parent if part == os.pardir else current / part
        shown = "/".join(parts[:i + 1])
        last = i == named[-1] and not names_folder
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            said = (f"external data file {location!r} does not exist" if last else
                    f"external data location {location!r} passes through {shown!r}, which "
                    "does not exist")
            raise ExternalDataError(f"tensor {tensor_name!r}: {said} in {base}",
                                    path=str(current)) from None
        except OSError as exc:
            raise ExternalDataError(
                f"tensor {tensor_name!r}: external data location {location!r} cannot be "
                f"read in {base}: {exc.strerror or exc}", path=str(current)) from None
        if stat.S_ISLNK(mode):
            _refuse_link(base, location, shown, current, tensor_name)
        if not last and not stat.S_ISDIR(mode):
            raise ExternalDataError(
                f"tensor {tensor_name!r}: external data location {location!r} passes "
                f"through {shown!r}, which is a file, not a folder, in {base}",
                path=str(current))
    if stat.S_ISDIR(mode):
        raise ExternalDataError(
            f"tensor {tensor_name!r}: external data location {location!r} is a folder in "
            f"{base}, not a file", path=str(current))
    if not stat.S_ISREG(mode):
        raise ExternalDataError(
            f"tensor {tensor_name!r}: external data location {location!r} is not a regular "
            f"file in {base} (a pipe, socket or device, whose bytes cannot be read by range)",
            path=str(current))
    return current


def _inside(base: Path, target: Path) -> bool:
    return target == base or base in target.parents


def _refuse_climbing(base: Path, location: str, tensor_name: str) -> None:
    """Refuse a location whose `..` climbs above the folder `base`: out of it, or back in
    (onnx refuses both; onnxruntime reads the second)."""
    target = (base / location).resolve()
    if not _inside(base, target):
        raise ExternalDataError(
            f"tensor {tensor_name!r}: external data location {location!r} resolves to "
            f"{target}, outside the model's folder {base}; refusing to read it",
            path=str(target))
    within = Path(os.path.normpath(base / location)).relative_to(base).as_posix()
    raise ExternalDataError(
        f"tensor {tensor_name!r}: external data location {location!r} climbs out of the "
        f"model's folder {base} and back into it ({within!r} in it): onnx refuses a location "
        "whose '..' leads above the folder (onnxruntime reads it)", path=str(target))


def _refuse_link(base: Path, location: str, link: str, at: Path, tensor_name: str) -> None:
    """Refuse a location that is or passes through the symbolic link `link` (at `at`): out
    of the folder `base`, the layout of a Hugging Face cache snapshot (its files link into
    ../../blobs), or within it. A copy of the folder with its links dereferenced is a
    folder onnx, onnxruntime and ge all read."""
    copy = (f"copy the folder with its links dereferenced, cp -rL {shlex.quote(str(base))} "
            "NEW_FOLDER, and load the model from NEW_FOLDER")
    target = (base / location).resolve()
    if not _inside(base, target):
        raise ExternalDataError(
            f"tensor {tensor_name!r}: external data location {location!r} resolves to "
            f"{target}, outside the model's folder {base}; refusing to read it: "
            f"{location!r} is, or passes through, a symbolic link out of the folder (as in a "
            "Hugging Face cache, whose snapshot files link into ../../blobs), which onnx "
            f"refuses too; {copy}", path=str(target))
    points = at.resolve()
    to = (f"to {points.relative_to(base).as_posix()!r} in the model's folder {base}"
          if _inside(base, points) else f"to {points}, outside the model's folder {base}")
    what = "is" if link == location else f"passes through {link!r},"
    raise ExternalDataError(
        f"tensor {tensor_name!r}: external data location {location!r} {what} a symbolic "
        f"link ({to}): onnx refuses every link in a location (onnxruntime follows one that "
        f"stays in the folder); {copy}", path=str(target))
