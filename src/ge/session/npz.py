"""Values in `.npz` files, read without pickle: the inputs `--inputs` and `load_inputs`
read, the outputs `ge run --output` writes (so that one reads what the other writes).

A tensor is one array under its name, as `numpy.savez` writes it; strings need a str dtype
(`'<U'`): an object array is stored pickled, and ge loads no pickle (one can run code), so
`write_npz` writes onnxruntime's string outputs (object arrays) as str arrays. A sequence,
map or optional is no array: the file describes them in one more entry, `__ge_values__`, a
JSON text (a 0-d str array) mapping each one's name to its value, where a sequence is a JSON
list of its elements, a map `{"map": [[key, value], ...]}` (keys keep their type: int or
str), an empty optional `null`, a number or a string itself, and a tensor `{"array": NAME}`,
the entry holding it (`y[0]`, `y[1]`: its place in the value, in Python's notation).

An ml_dtypes array (bfloat16, float8, int4 ...) is stored as its bytes, void elements of its
size (`|V1`), which is what `numpy.savez` writes of most of them; a float8_e5m2 array, which
`numpy.savez` writes as `<f1` and `numpy.load` then refuses, is read as such void bytes too.
Checked as an input of a model declaring that type, void bytes of its size are that type
again (`ge.session.low_bit.restored`).
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from ge._text import first_and_more
from ge.errors import VerificationInputError
from ge.session.low_bit import read_one_byte_floats, storable
from ge.session.values import Key, is_nested, path_text

__all__ = ["VALUES_ENTRY", "read_npz", "write_npz"]

#: The entry of an `.npz` file describing its sequences, maps and optionals (JSON).
VALUES_ENTRY = "__ge_values__"


class _Malformed(Exception):
    """The `__ge_values__` entry says what no value is (caught and told as GE1602)."""


def _object_arrays_text(path: Path, names: list[str]) -> str:
    shown = first_and_more([repr(n) for n in names])
    which = "is an object array" if len(names) == 1 else "are object arrays"
    return (f"{shown} {which} (dtype=object), which numpy stores pickled and ge does not "
            "load (a pickle can run code): save strings with a str dtype, "
            f"np.savez({str(path)!r}, {names[0]}=array.astype(str)); a sequence or map "
            "as docs/session.md says")


def read_npz(path: str | os.PathLike[str], what: str = "values") -> dict[str, Any]:
    """The values of an `.npz` file by name: its arrays, and the sequences, maps and
    optionals its `__ge_values__` entry describes (their tensors' entries taken into them).
    A file that cannot be read, an object array, or an entry `__ge_values__` that is not
    what `write_npz` writes is `VerificationInputError` (GE1602) saying why (`what` names
    the file's purpose: "inputs")."""
    path = Path(path)
    arrays: dict[str, np.ndarray] = {}
    pickled: list[str] = []
    if os.path.isfile(path) and not zipfile.is_zipfile(path):
        # (numpy's own answer, about pickled data and allow_pickle=, misleads: it is not an
        # .npz at all, and ge never loads pickles)
        raise VerificationInputError(
            f"cannot read {what} from {path}: it is not an .npz file (a zip archive of "
            "arrays, as np.savez writes it)")
    try:
        with np.load(path, allow_pickle=False) as data:
            for name in data.files:
                try:
                    arrays[name] = data[name]
                except ValueError as err:  # "Object arrays cannot be loaded when ..."
                    if "allow_pickle" in str(err):
                        pickled.append(name)
                        continue
                    # np.savez writes a float8_e5m2 array as `<f1`, which np.load refuses
                    member = f"{name}.npy" if f"{name}.npy" in data.zip.namelist() else name
                    with data.zip.open(member) as stream:
                        raw = read_one_byte_floats(stream)
                    if raw is None:
                        raise
                    arrays[name] = raw
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise VerificationInputError(f"cannot read {what} from {path}: {err}") from err
    if pickled:
        raise VerificationInputError(
            f"cannot read {what} from {path}: {_object_arrays_text(path, pickled)}")
    if VALUES_ENTRY not in arrays:
        return arrays
    try:
        described = json.loads(str(arrays.pop(VALUES_ENTRY)[()]))
        if not isinstance(described, dict):
            raise _Malformed(f"a JSON {type(described).__name__}, not an object of values")
        used: set[str] = set()
        values = {name: _decoded(value, arrays, used) for name, value in described.items()}
    except (_Malformed, ValueError, IndexError) as err:
        raise VerificationInputError(
            f"cannot read {what} from {path}: its entry {VALUES_ENTRY!r} is not what ge "
            f"writes ({err}); see docs/session.md") from None
    out = {name: array for name, array in arrays.items() if name not in used}
    out.update(values)
    return out


def _decoded(value: Any, arrays: Mapping[str, np.ndarray], used: set[str]) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_decoded(item, arrays, used) for item in value]
    if isinstance(value, dict) and set(value) == {"array"}:
        entry = value["array"]
        if not isinstance(entry, str) or entry not in arrays:
            raise _Malformed(f"no entry {entry!r} holds the array it names")
        used.add(entry)
        return arrays[entry]
    if isinstance(value, dict) and set(value) == {"map"} and isinstance(value["map"], list):
        out = {}
        for pair in value["map"]:
            if (not isinstance(pair, list) or len(pair) != 2 or isinstance(pair[0], bool)
                    or not isinstance(pair[0], (int, str))):
                raise _Malformed(f"a map's entries are [key, value] with an int or str key, "
                                 f"got {pair!r}")
            out[pair[0]] = _decoded(pair[1], arrays, used)
        return out
    raise _Malformed(f"{json.dumps(value)[:60]} is no value")


def _storable(value: Any) -> np.ndarray:
    """An array as the file holds it: an object array (onnxruntime's strings) as str, an
    ml_dtypes one (float8, int4, bfloat16) as the void bytes numpy writes of most of them
    (`read_npz` gives them back as void; checked as a model's inputs, they are the
    model's type again: `ge.session.low_bit.restored`)."""
    array = np.asarray(value)
    return array.astype(np.str_) if array.dtype == object else storable(array)


def _encoded(value: Any, name: str, path: tuple[Key, ...], arrays: dict[str, np.ndarray]
             ) -> Any:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [_encoded(v, name, (*path, i), arrays) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {"map": [[_plain(k), _encoded(v, name, (*path, _plain(k)), arrays)]
                        for k, v in value.items()]}
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, int, float, str)):  # (NaN and inf too: Python's JSON)
        return value
    entry = base = f"{name}{path_text(path)}"  # a tensor (or another scalar): an entry
    count = 1
    while entry in arrays:  # (an output of that very name)
        entry, count = f"{base}#{count}", count + 1
    arrays[entry] = _storable(value)
    return {"array": entry}


def _plain(key: Any) -> Any:
    """A map's key as JSON holds it: a Python int or str."""
    return key.item() if isinstance(key, np.generic) else key


def write_npz(file: str | os.PathLike[str] | IO[bytes], values: Mapping[str, Any]) -> None:
    """Write `values` (arrays, and the lists, dicts and None of sequences, maps and
    optionals) to `file` (a path or a binary stream) as `read_npz` reads them, without
    pickle. Like `numpy.savez`, but any name may be written (`np.savez(f, file=...)`
    fails), and strings as str arrays."""
    arrays = {name: _storable(v) for name, v in values.items() if not is_nested(v)}
    described = {name: _encoded(v, name, (), arrays) for name, v in values.items()
                 if is_nested(v)}
    if described:
        arrays[VALUES_ENTRY] = np.array(json.dumps(described))
    with zipfile.ZipFile(file, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as stream:
                np.lib.format.write_array(stream, array, allow_pickle=False)
