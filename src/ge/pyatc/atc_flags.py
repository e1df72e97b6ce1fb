"""atc's flags that pyatc knows of but cannot honour, each with what ge does instead, and
how atc reads a command line.

One table (`ATC_FLAGS`): pyatc's parser takes each flag in it (hidden from `--help`) and
`check_atc_flags` refuses one given (GE1701, before any work) unless its value asks for what
ge does anyway (`--mode=0`, `--precision_mode=must_keep_origin_dtype`): refused rather than
ignored, since the model written would not be what the script asks for.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ATC_FLAGS", "AtcFlag", "add_atc_flags", "atc_argv", "check_atc_flags"]


@dataclass(frozen=True)
class AtcFlag:
    """An atc flag pyatc takes: `instead` says what ge does instead; `accepted` are the
    values asking for what ge does anyway (accepted, nothing else done)."""

    name: str
    instead: str
    accepted: tuple[str, ...] = ()
    number: bool = False  # an int of atc's: read as its parsing reads it (`00`, `+0` are 0)

    def check(self, value: str) -> None:
        """Refuse `value` (CommandLineError, GE1701) unless it is an accepted one."""
        from ge.errors import CommandLineError

        read = value.strip()
        if self.number and re.fullmatch(r"[+-]?[0-9]+", read):
            read = str(int(read))
        if read in self.accepted:
            return
        given = f"--{self.name}={value}" if self.accepted else f"--{self.name}"
        raise CommandLineError(f"{given} is not supported: {self.instead}")


_DYNAMIC = ("give --input_shape with -1 to keep a dim dynamic (as the model declares it), or "
            "a size to fix it")
_GEARS = f"ge keeps dynamic dims dynamic, there are no gears; {_DYNAMIC}"
_TYPES = "ge keeps the model's element types"

#: Checked in this order (`--mode=1` first: atc's other mode flags come with it).
ATC_FLAGS = (
    AtcFlag("mode", "pyatc builds a model (atc's --mode=0); to see one, `ge dump MODEL` "
                    "prints it as text and `ge inspect MODEL --json` its inputs, outputs and "
                    "operators as JSON (atc's --mode=1, 6); `ge inspect MODEL` checks one "
                    "without compiling it (atc's --mode=3)", accepted=("0",), number=True),
    AtcFlag("om", "it is atc's model to convert with --mode=1: see `ge dump MODEL` and `ge "
                  "inspect MODEL --json`"),
    AtcFlag("json", "it is atc's output of --mode=1: see `ge dump MODEL` and `ge inspect "
                    "MODEL --json`"),
    AtcFlag("weight", "ge compiles ONNX models, whose weights are in the model file (or its "
                      "external data); --weight is for Caffe's .caffemodel"),
    AtcFlag("dynamic_batch_size", _GEARS),
    AtcFlag("dynamic_image_size", _GEARS),
    AtcFlag("dynamic_dims", _GEARS),
    AtcFlag("input_shape_range", f"ge has no shape ranges, a dynamic dim stays dynamic; "
                                 f"{_DYNAMIC}"),
    AtcFlag("input_hint_shape", f"ge takes no shape hints, a dynamic dim stays dynamic; "
                                f"{_DYNAMIC}"),
    AtcFlag("precision_mode", f"{_TYPES}, which must_keep_origin_dtype asks for (accepted); "
                              "the other modes (force_fp16, allow_fp32_to_fp16, "
                              "allow_mix_precision, force_fp32...) would change them",
            accepted=("must_keep_origin_dtype",)),
    AtcFlag("precision_mode_v2", f"{_TYPES}, which origin asks for (accepted); the other "
                                 "modes (fp16, mixed_float16, mixed_bfloat16...) would change "
                                 "them", accepted=("origin",)),
    AtcFlag("keep_dtype", f"{_TYPES} everywhere (it changes no precision), so there is "
                          "nothing to keep: leave the flag out"),
    AtcFlag("output_type", f"{_TYPES}, its outputs' too: cast them in the model to change "
                           "them"),
    AtcFlag("op_select_implmode", "ge selects no operator implementations: the runtime "
                                  "running the ONNX model does"),
    AtcFlag("enable_small_channel", "ge has no small-channel optimisation: the model keeps "
                                    "its layout"),
    AtcFlag("is_input_adjust_hw_layout", "ge keeps the inputs' layout and element types: it "
                                         "inserts no AIPP preprocessing"),
    AtcFlag("insert_op_conf", "ge inserts no AIPP preprocessing"),
    AtcFlag("out_nodes", "ge keeps every graph output"),
    AtcFlag("dump_mode", "ge writes no operator dump; `ge compile MODEL -o OUT --dump DIR` "
                         "writes the graph after each pass"),
    AtcFlag("check_report", "ge writes no operator check report; `ge inspect MODEL` lists "
                            "the model's operators, `ge compile --report FILE` what the "
                            "compilation did"),
    AtcFlag("optimization_switch", 'ge\'s passes are switched by --fusion_switch_file '
                                   '({"Switch": {"GraphFusion": {"PassName": "off"}}})'),
)


def add_atc_flags(parser: argparse.ArgumentParser) -> None:
    """Let `parser` take every flag of `ATC_FLAGS` (hidden from --help)."""
    for flag in ATC_FLAGS:
        parser.add_argument(f"--{flag.name}", default=None, metavar="VALUE",
                            help=argparse.SUPPRESS)


def check_atc_flags(ns: argparse.Namespace) -> None:
    """Refuse (GE1701) the first flag of `ATC_FLAGS` given in `ns` whose value is not an
    accepted one."""
    for flag in ATC_FLAGS:
        value = getattr(ns, flag.name)
        if value is not None:
            flag.check(value)


def atc_argv(args: Iterable[str]) -> list[str]:
    """`args` as atc reads them: a flag written with one dash is one with two (`-model=m`
    is `--model=m`), and dashes in a flag's name are underscores (`--soc-version` is
    `--soc_version`). A value (`-1,3`, after a flag) is left as it is."""
    read: list[str] = []
    for arg in args:
        if len(arg) > 2 and arg[0] == "-" and arg[1].isalpha():
            arg = "-" + arg
        if arg.startswith("--") and len(arg) > 2 and arg[2].isalpha():
            name, sep, value = arg[2:].partition("=")
            arg = "--" + name.replace("-", "_") + sep + value
        read.append(arg)
    return read

