"""`ge.session`: running graphs and checking them numerically.

`Session` is GE's session API over onnxruntime; `run_model` runs one model (onnxruntime,
or onnx's reference evaluator for models holding custom operators with numpy kernels);
`generate_inputs` / `load_inputs` / `check_inputs` give and check inputs; `compare_outputs`
and `verify` compare two runs in a `VerificationReport`. Sequences, maps and optionals are
the Python values onnxruntime takes and gives (list, dict, None: `values`), in `.npz` files
as `npz` writes them. `compilation` holds `ge.compile`
(compile with `ge.compiler`, then verify here). This package imports the compiler, never
the other way round; the compiler is imported when a compilation starts, not with the
package.
"""

from ge.session.model_interface import InputSpec, model_inputs
from ge.session.runner import ModelRunner, run_model
from ge.session.session import Session
from ge.session.verification import (
    OutputComparison,
    VerificationReport,
    check_inputs,
    compare_outputs,
    generate_inputs,
    load_inputs,
    reference_outputs,
    verify,
)

__all__ = [
    "InputSpec",
    "ModelRunner",
    "OutputComparison",
    "Session",
    "VerificationReport",
    "check_inputs",
    "compare_outputs",
    "generate_inputs",
    "load_inputs",
    "model_inputs",
    "reference_outputs",
    "run_model",
    "verify",
]
