"""docs/tutorial.md works as printed: a reader following it gets what it shows.

The tutorial's executable blocks are

- ```python blocks headed by `# my_passes/<file>.py` or `# test_<name>.py`: files to write
  (a later block with the same header replaces the file, as the reader's edit does);
- ```bash blocks: lines `$ COMMAND`, each followed by the output the command printed.

`test_the_tutorial_runs_as_printed` goes through them in order in a temporary folder that
holds the vendored model the commands name (at the same relative path): it writes each
file, runs each command with `bash -c` (the virtualenv's `bin` first on PATH, so `ge` and
`python` are this checkout's; `GE_DISABLE_PLUGIN_AUTOLOAD=1`; `export NAME=VALUE` lines set
the variable for the commands after them), and checks that every command exits with 0 and
that its key phrases are both in the printed output and in the real one (whitespace runs
count as one space: table columns are as wide as their longest cell). Nothing is written
outside the temporary folder (no bytecode, no pytest cache).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from model_paths import shared_models_dir
from plugin_fixtures import clean_plugin_state  # noqa: F401  (no plugin outlives the test)

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"
VENV_BIN = Path(sys.executable).parent

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
FILE_HEADER = re.compile(r"# (my_passes/\w+\.py|test_\w+\.py)\n")
EXPORT = re.compile(r"export (\w+)=(.*)")
ONNX_NAME = re.compile(r"[\w./-]+\.onnx")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# The key phrases of each command's output, in the tutorial's order of commands: each must
# be in what the tutorial prints for the command and in what the command really prints.
KEY_PHRASES: list[tuple[str, list[str]]] = [
    ("ge inspect distilbert_tiny.onnx",
     ["graph main_graph", "opsets: ai.onnx=17", "│ Div │ 2 │", "│ Erf │ 2 │"]),
    ("ge dump distilbert_tiny.onnx | grep -E 'activation/(Div|Constant)_output_0[:= ]'",
     ["activation/Constant_output_0: float32[] = Const[value=Tensor(float32[] 1.4142)]()",
      "activation/Div_output_0 = Div(%/model/transformer/layer.0/ffn/lin1/Add_output_0, "
      "%/model/transformer/layer.0/ffn/activation/Constant_output_0)"]),
    ("ge compile distilbert_tiny.onnx -o baseline.onnx --json | python -c",
     ["Div: 2 -> 2"]),
    ("export ASCEND_GE_PY_PASS_PATH=my_passes", []),
    ("ge passes list",
     ["│ DivByConstToMul │ pattern_fusion │ AfterInferShape │ - │ - │",
      "my_passes/div_to_mul.py:9 │"]),
    ("ge passes explain DivByConstToMul distilbert_tiny.onnx",
     ["matched against the model after shape inference: the pass's stage",
      "anchor 'Div' (Div), 3 pattern node(s); 2 candidate(s), 0 would be rewritten",
      "'/model/transformer/layer.0/ffn/activation/Div': depth 1/3: op type: pattern node "
      "'Const' (Const) wants a constant, target node '/model/transformer/layer.0/ffn/lin1/Add'"
      " is Add (input 0 of '/model/transformer/layer.0/ffn/activation/Div')"]),
    ("ge passes explain DivByConstToMul distilbert_tiny.onnx",
     ["2 candidate(s), 2 would be rewritten",
      "rewrite at '/model/transformer/layer.0/ffn/activation/Div': "
      "/model/transformer/layer.0/ffn/activation/Constant, "
      "/model/transformer/layer.0/ffn/activation/Div",
      "rewrite at '/model/transformer/layer.1/ffn/activation/Div'"]),
    ("ge compile distilbert_tiny.onnx -o out.onnx --verify --html page.html",
     ["│ AfterInferShape │ DivByConstToMul │ pattern_fusion │ div_to_mul.py:9 │ main_graph │ "
      "success │ 2/2/0 │",
      "│ Div │ 2 │ 0 │ -2 │", "nodes 114 → 65 (-49), constants 46 → 27;",
      "verification ok: 1 output(s) match",
      "wrote out.onnx", "wrote page page.html"]),
    ("ge dump out.onnx | grep 'activation/Const\\b'",
     ["%/model/transformer/layer.0/ffn/activation/Const: float32[] = "
      "Const[value=Tensor(float32[] 0.7071)]()",
      "%/model/transformer/layer.0/ffn/activation/Div_output_0 = Mul(%/model/transformer/"
      "layer.0/ffn/lin1/MatMul_output_0, %/model/transformer/layer.0/ffn/activation/Const)",
      "%/model/transformer/layer.1/ffn/activation/Div_output_0 = Mul(%/model/transformer/"
      "layer.1/ffn/lin1/MatMul_output_0, %/model/transformer/layer.0/ffn/activation/Const)"]),
    ("python -m pytest -q test_div_to_mul.py", ["2 passed"]),
]


@dataclass
class WriteFile:
    path: str
    text: str


@dataclass
class Command:
    line: str
    printed: list[str] = field(default_factory=list)


def _steps(text: str) -> list[WriteFile | Command]:
    """The tutorial's files and commands, in the order a reader meets them."""
    steps: list[WriteFile | Command] = []
    for language, body in FENCE.findall(text):
        if language == "python":
            header = FILE_HEADER.match(body)
            assert header, f"a python block of the tutorial names no file:\n{body[:200]}"
            steps.append(WriteFile(header.group(1), body))
        elif language == "bash":
            lines = body.splitlines()
            assert lines and lines[0].startswith("$ "), f"a bash block starts with output:\n{body}"
            for line in lines:
                if line.startswith("$ "):
                    steps.append(Command(line[2:]))
                else:
                    current = steps[-1]
                    assert isinstance(current, Command)
                    current.printed.append(line)
    return steps


def _flat(text: str) -> str:
    """`text` without colours, every run of whitespace one space."""
    return " ".join(ANSI.sub("", text).split())


def _environment() -> dict[str, str]:
    dropped = {"ASCEND_GE_PY_PASS_PATH", "COLUMNS", "FORCE_COLOR", "PY_COLORS",
               "CLICOLOR_FORCE", "GE_HTML_LAYOUT"}
    env = {k: v for k, v in os.environ.items()
           if k not in dropped and not k.startswith("PYTEST_")}
    env.update({
        "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        "GE_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_ADDOPTS": "-p no:cacheprovider",
    })
    return env


def _copy_models(steps: list[WriteFile | Command], folder: Path) -> list[str]:
    """Copy each vendored model the tutorial names to the same relative path in `folder`."""
    vendored = {p.name: p for p in shared_models_dir().glob("*.onnx")}
    copied = []
    for step in steps:
        text = step.line if isinstance(step, Command) else step.text
        for name in ONNX_NAME.findall(text):
            source = vendored.get(Path(name).name)
            target = folder / name
            if source is not None and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(source, target)
                copied.append(name)
    return copied


def test_the_tutorial_has_the_blocks_the_test_checks() -> None:
    steps = _steps(TUTORIAL.read_text())
    commands = [s for s in steps if isinstance(s, Command)]
    assert len(commands) == len(KEY_PHRASES), [c.line for c in commands]
    for command, (start, phrases) in zip(commands, KEY_PHRASES):
        assert command.line.startswith(start), (command.line, start)
        printed = _flat("\n".join(command.printed))
        for phrase in phrases:
            assert _flat(phrase) in printed, f"`{command.line}`: the tutorial lacks {phrase!r}"
    # The mistaken pass, then the fixed one under the same header, between the explains.
    passes = [i for i, s in enumerate(steps)
              if isinstance(s, WriteFile) and s.path == "my_passes/div_to_mul.py"]
    explains = [i for i, s in enumerate(steps)
                if isinstance(s, Command) and s.line.startswith("ge passes explain")]
    assert len(passes) == 2 and len(explains) == 2
    assert passes[0] < explains[0] < passes[1] < explains[1]
    mistaken, fixed = (steps[i] for i in passes)
    assert isinstance(mistaken, WriteFile) and isinstance(fixed, WriteFile)
    assert "1.0 / inputs[0]" in mistaken.text and "inputs[0] / 1.0" in fixed.text


def test_the_tutorial_runs_as_printed(tmp_path: Path) -> None:
    steps = _steps(TUTORIAL.read_text())
    assert _copy_models(steps, tmp_path) == ["distilbert_tiny.onnx"]
    env = _environment()
    assert shutil.which("ge", path=env["PATH"]) == str(VENV_BIN / "ge")
    phrases = iter(KEY_PHRASES)
    for step in steps:
        if isinstance(step, WriteFile):
            target = tmp_path / step.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step.text)
            continue
        _, wanted = next(phrases)
        export = EXPORT.fullmatch(step.line)
        if export:
            (value,) = shlex.split(export.group(2))
            assert "$" not in value
            env[export.group(1)] = value
            continue
        run = subprocess.run(["bash", "-o", "pipefail", "-c", step.line], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=600,
                             check=False)
        shown = f"`{step.line}` exited with {run.returncode}\n{run.stdout}\n{run.stderr}"
        assert run.returncode == 0, shown
        output = _flat(run.stdout)
        for phrase in wanted:
            assert _flat(phrase) in output, f"missing {phrase!r} in the output of {shown}"
    assert next(phrases, None) is None
    assert (tmp_path / "out.onnx").is_file() and (tmp_path / "page.html").is_file()
    assert not (tmp_path / ".pytest_cache").exists()


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@pytest.mark.parametrize("target", sorted(set(re.findall(r"\]\(([^)\s]+)\)",
                                                         TUTORIAL.read_text()))))
def test_the_tutorial_links_exist(target: str) -> None:
    path, _, anchor = target.partition("#")
    assert "://" not in path, "the tutorial links only to files of the repository"
    linked = (TUTORIAL.parent / path).resolve() if path else TUTORIAL
    assert linked.is_file(), f"{target}: no such file"
    if anchor:
        headings = re.findall(r"^#+ (.+)$", linked.read_text(), re.M)
        assert anchor in {_slug(h) for h in headings}, f"{target}: no such heading"
