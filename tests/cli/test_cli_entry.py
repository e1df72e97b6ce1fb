"""`python -m ge`, `ge --version`, a light `import ge.cli`, and the progress display (shown
only on a terminal)."""

from __future__ import annotations

import codecs
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import DISTILBERT, SRC, process_env, run_ge, run_process

import ge
from ge.cli.progress import CompileProgress, compile_progress, progress_wanted

HEAVY = ("onnx", "onnxruntime", "numpy", "rich")


def test_python_m_ge_help_and_version() -> None:
    result = run_process("-m", "ge", "--help")
    assert result.returncode == 0, result.stderr
    for name in ("compile", "dump", "inspect", "passes", "run"):
        assert f"  {name} " in result.stdout
    result = run_process("-m", "ge", "--version")
    assert (result.returncode, result.stdout) == (0, f"ge, version {ge.__version__}\n")


def test_import_and_help_are_light() -> None:
    code = (
        "import sys\n"
        "import ge.cli\n"
        f"heavy = {HEAVY!r}\n"
        "after_import = [m for m in heavy if m in sys.modules]\n"
        "try:\n"
        "    ge.cli.main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "try:\n"
        "    ge.cli.main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(after_import, [m for m in heavy if m in sys.modules], file=sys.stderr)\n"
    )
    result = run_process("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "[] []"


@pytest.mark.parametrize("command", ["compile", "dump", "run", "verify", "inspect", "diff"])
def test_a_commands_help_imports_nothing_heavy(command: str) -> None:
    """`ge compile --help` imported onnx and numpy first (0.2-0.45 s), as the command would
    run (stop 47's held imports): click prints help before any command runs."""
    code = (
        "import sys\n"
        "from ge.cli.command_line import main\n"
        "try:\n"
        f"    main([{command!r}, '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)\n"
    )
    result = run_process("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Usage: ge {command} ")
    assert result.stderr.strip() == "[]"


def test_onnx_reference_is_imported_only_to_evaluate() -> None:
    """`onnx.reference` (~60-90 ms to import) is imported when a compilation first
    evaluates a node: a dynamo export, folded already, compiles without it; DistilBERT's
    classic export folds its shape computations, so it is imported there."""
    code = (
        "import sys\n"
        "import ge\n"
        "loaded = []\n"
        "for path in sys.argv[1:]:\n"
        "    ge.compile(path)\n"
        "    loaded.append('onnx.reference' in sys.modules)\n"
        "print(loaded, file=sys.stderr)\n"
    )
    result = run_process("-c", code, str(DISTILBERT.with_name("distilbert_tiny_dynamo.onnx")),
                         str(DISTILBERT))
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "[False, True]"


def test_the_process_entry_point_is_light_until_the_command_runs() -> None:
    """`ge --version` through the console script's entry point (`process_exit.run`) imports
    nothing heavy: the entry point imported the plugin cache, hence onnx and numpy, before
    the command line's own signal handling was in place, so a Ctrl-C in that half second
    printed a traceback, and `ge --version` took 0.6 s (trial ZZ)."""
    code = (
        "import sys\n"
        "from ge.cli.process_exit import run\n"
        "sys.argv = ['ge', '--version']\n"
        "try:\n"
        "    run()\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)\n"
    )
    result = run_process("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "[]"


@pytest.mark.parametrize("command", [["inspect", str(DISTILBERT)], ["passes", "list"],
                                     ["compile", str(DISTILBERT), "-o", "{out}"]])
def test_a_reader_that_stops_reading_ends_the_command_as_sigpipe_would(
        tmp_path: Path, command: list[str]) -> None:
    """`ge inspect m.onnx | head -1` exited 1 without a word (rich's and click's handling of
    a broken pipe), which a script with `set -o pipefail` read as a failure of the command
    (trial ZZ): now 141, as SIGPIPE ends a process, still without a word. A model the
    compilation had written stays (it was complete; only the report could not be read)."""
    out = tmp_path / "o.onnx"
    args = [a.format(out=out) for a in command]
    process = subprocess.Popen([sys.executable, "-m", "ge", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=process_env(None))
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before the command writes anything
    stderr = process.stderr.read()
    assert process.wait(timeout=300) == 141, stderr
    assert stderr == b""
    if command[0] == "compile":
        assert out.is_file()


def test_compile_in_a_pipe_shows_no_progress(tmp_path: Path) -> None:
    """A subprocess with pipes: stdout has the JSON, stderr nothing (no progress, no
    warnings)."""
    result = run_process("-m", "ge", "compile", str(DISTILBERT), "-o", str(tmp_path / "o.onnx"),
                         "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert json.loads(result.stdout)["invocations"]


def test_progress_only_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert progress_wanted(io.StringIO()) is False
    assert progress_wanted(Tty()) is True
    with compile_progress("m.onnx") as progress:  # pytest's stderr is no terminal
        assert progress.observers == []
        progress.phase("loading")  # shows nothing, and says nothing of it


class _Status:
    """A rich status line's stand-in: the texts it was given, in order."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def update(self, text: Any) -> None:
        self.texts.append(str(text))


@pytest.mark.builtin_passes
def test_the_progress_observer_follows_steps_and_passes() -> None:
    status = _Status()
    ge.compile(DISTILBERT, observers=[CompileProgress(status, "m.onnx")])
    assert status.texts[0] == "compiling m.onnx: step 1/8 BeforeInferShape"
    assert any("last ConstantFolding on main_graph" in t for t in status.texts)
    assert status.texts[-1].startswith("compiling m.onnx: step 8/8 FinalValidation")


@pytest.mark.builtin_passes
def test_the_progress_covers_loading_and_writing(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial H: at 426k nodes loading and saving took 16 s of 51 with nothing shown; the
    display now says what the command does before and after the pipeline."""
    import contextlib

    import ge.cli.progress as progress_module

    status = _Status()

    @contextlib.contextmanager
    def shown(model: str, *, enabled: bool | None = None):  # type: ignore[no-untyped-def]
        yield progress_module.CommandProgress(status, model)

    monkeypatch.setattr(progress_module, "compile_progress", shown)
    out, page = tmp_path / "out.onnx", tmp_path / "page.html"
    code, _, stderr = run_ge("compile", str(DISTILBERT), "-o", str(out), "--verify",
                             "--html", str(page))
    assert code == 0, stderr
    prefix = f"compiling {DISTILBERT}: "
    assert status.texts[:2] == [f"{prefix}loading",
                                f"{prefix}running the model as given for --verify"]
    assert status.texts[2] == f"{prefix}step 1/8 BeforeInferShape"
    assert status.texts[-2:] == [f"{prefix}writing {out}", f"{prefix}writing {page}"]


def test_debug_raises_instead_of_one_line(tmp_path: Path) -> None:
    code, _, stderr = run_ge("compile", str(tmp_path / "absent.onnx"), "-o",
                             str(tmp_path / "o.onnx"))
    assert code == 1 and stderr.startswith("ge: [GE1102] ")
    from click.testing import CliRunner

    from ge.cli import cli

    result = CliRunner().invoke(cli, ["--debug", "inspect", str(tmp_path / "absent.onnx")])
    assert type(result.exception).__name__ == "ModelNotFoundError"


def test_docs_name_every_flag() -> None:
    """docs/cli.md documents every option of every command (and of pyatc)."""
    import click

    from ge.cli import cli
    from ge.pyatc.command import _parser

    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    ctx = click.Context(cli)
    commands: list[click.Command] = []
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            commands += [command.get_command(ctx, n) for n in command.list_commands(ctx)]
        else:
            commands.append(command)
    for command in commands:
        assert f"## `ge {command.name}`" in text or f"`ge passes {command.name}`" in text
        for param in command.params:
            for opt in [*param.opts, *param.secondary_opts]:
                if opt.startswith("--"):
                    assert opt in text, f"{command.name} {opt}"
    for action in _parser("pyatc")._actions:
        for opt in action.option_strings:
            if opt.startswith("--"):
                assert opt in text, f"pyatc {opt}"


SELF_TERMINATE = '''\
import os
import signal

from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="SelfTerminate", stage=PassStage.AFTER_INFER_SHAPE)
class SelfTerminate(FusionBasePass):
    def run(self, graph, context):
        os.kill(os.getpid(), signal.SIGTERM)
        return True
'''


SELF_INTERRUPT = SELF_TERMINATE.replace("SIGTERM", "SIGINT").replace(
    "SelfTerminate", "SelfInterrupt").replace(
    "        os.kill", "        signal.signal(signal.SIGINT, signal.default_int_handler)\n"
                      "        os.kill")  # (a background job may start with SIGINT ignored)


def _pyatc_with_plugin(plugin: Path, prefix: Path) -> subprocess.CompletedProcess[str]:
    """`pyatc` compiling DistilBERT to `prefix`.onnx with `plugin` on ASCEND_GE_PY_PASS_PATH."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "ASCEND_GE_PY_PASS_PATH": str(plugin)}
    return subprocess.run([sys.executable, "-m", "ge.pyatc", "--model", str(DISTILBERT),
                           "--framework", "5", "--output", str(prefix)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)

def test_ctrl_c_ends_a_command_with_130_and_one_line_writing_nothing(tmp_path: Path) -> None:
    """Ctrl-C ends `ge` and `pyatc` as a shell reports it (130), with one line and no
    traceback; it was click's "Aborted!" and status 1, pyatc's traceback."""
    plugin = tmp_path / "self_interrupt.py"
    plugin.write_text(SELF_INTERRUPT)
    out = tmp_path / "out"
    out.mkdir()
    for extra in ([], ["--json"]):
        result = run_process("-m", "ge", "compile", str(DISTILBERT), "-o", str(out / "m.onnx"),
                             "--pass-path", str(plugin), "--report", str(out / "r.json"),
                             *extra)
        assert result.returncode == 130, result.stderr
        assert result.stderr == "ge: interrupted; nothing was written\n", result.stderr
        assert result.stdout == "" and list(out.iterdir()) == []
    # the graph dumps made before the interrupt stay, and the line says so (trial P)
    dumps = tmp_path / "dumps"
    result = run_process("-m", "ge", "compile", str(DISTILBERT), "-o", str(out / "m.onnx"),
                         "--pass-path", str(plugin), "--dump", str(dumps))
    assert result.returncode == 130, result.stderr
    assert result.stderr == (f"ge: interrupted; nothing was written but the graph dumps made "
                             f"so far stay in {dumps}\n"), result.stderr
    assert any(p.suffix == ".onnx" for p in dumps.iterdir()) and list(out.iterdir()) == []
    pyatc = _pyatc_with_plugin(plugin, out / "p")
    assert pyatc.returncode == 130
    assert pyatc.stderr.endswith("pyatc: interrupted; nothing was written\n")
    assert "Traceback" not in pyatc.stderr and list(out.iterdir()) == []


@pytest.mark.parametrize(("signal_name", "status", "word"), [
    ("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")])
@pytest.mark.parametrize("debug", [False, True])
def test_an_interrupt_before_the_command_starts_its_work_ends_it_the_same(
        tmp_path: Path, signal_name: str, status: int, word: str, debug: bool) -> None:
    """In the first moments of a command (while it imports what it needs, before its output
    handling) Ctrl-C or SIGTERM gave click's "Aborted!" and status 1 (audit): now the
    status and line of a later interrupt; with --debug, the traceback before them."""
    out = tmp_path / "out"
    out.mkdir()
    early = (
        "import os, signal\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import ge.cli.compile as command\n"
        "def interrupt(pairs):\n"
        f"    os.kill(os.getpid(), signal.{signal_name})\n"
        "command.parse_options = interrupt\n"
        "import ge.cli\n"
        f"ge.cli.main([*{['--debug'] if debug else []!r}, 'compile', {str(DISTILBERT)!r},\n"
        f"             '-o', {str(out / 'm.onnx')!r}])\n")
    result = run_process("-c", early)
    assert result.returncode == status, result.stderr
    assert result.stderr.endswith(f"ge: {word}; nothing was written\n"), result.stderr
    assert "Aborted!" not in result.stderr
    assert ("Traceback" in result.stderr) is debug
    assert list(out.iterdir()) == []


def test_an_interrupt_after_the_outputs_are_in_place_names_them(tmp_path: Path) -> None:
    """SIGTERM as the command ends (its files renamed into place, the summary not printed
    yet) said "nothing was written" while everything had been (audit): it names them."""
    out = tmp_path / "out"
    out.mkdir()
    late = (
        "import os, signal\n"
        "import ge.cli.compile as command\n"
        "def terminate(*args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "command.print_compile_result = terminate\n"
        "import ge.cli\n"
        f"ge.cli.main(['compile', {str(DISTILBERT)!r}, '-o', {str(out / 'm.onnx')!r},\n"
        f"             '--report', {str(out / 'r.json')!r}])\n")
    result = run_process("-c", late)
    assert result.returncode == 143, result.stderr
    assert result.stderr.endswith(
        f"ge: terminated; {out / 'r.json'}, {out / 'm.onnx'} had been written\n"), result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["m.onnx", "r.json"]


def test_sigterm_ends_a_command_as_an_interrupt_writing_nothing(tmp_path: Path) -> None:
    """SIGTERM (timeout, docker stop, a cancelled CI job) ends `ge` and `pyatc` with status
    143 and nothing written: not as the running pass's failure, and not leaving the temporary
    files of a save in progress."""
    plugin = tmp_path / "self_terminate.py"
    plugin.write_text(SELF_TERMINATE)
    out = tmp_path / "out"
    out.mkdir()
    result = run_process("-m", "ge", "compile", str(DISTILBERT), "-o", str(out / "m.onnx"),
                         "--pass-path", str(plugin), "--report", str(out / "r.json"))
    assert result.returncode == 143, result.stderr
    assert "E13028" not in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.endswith("ge: terminated; nothing was written\n")
    assert list(out.iterdir()) == []

    pyatc = _pyatc_with_plugin(plugin, out / "p")
    assert pyatc.returncode == 143
    assert pyatc.stderr.endswith("pyatc: terminated; nothing was written\n")
    assert list(out.iterdir()) == []

    # While saving with external data: the data file's temporary is being written.
    during_save = (
        "import os, signal\n"
        "import ge.graph.model_io as model_io\n"
        "made = model_io.graph_to_model\n"
        "def terminate_after(*args, **kwargs):\n"
        "    model = made(*args, **kwargs)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return model\n"
        "model_io.graph_to_model = terminate_after\n"
        "import ge.cli\n"
        f"ge.cli.main(['compile', {str(DISTILBERT)!r}, '-o', {str(out / 'm.onnx')!r},\n"
        "             '--external-data'])\n")
    result = run_process("-c", during_save)
    assert result.returncode == 143, result.stderr
    assert list(out.iterdir()) == []


def test_an_ascii_stdout_gets_ascii_not_a_traceback(tmp_path: Path) -> None:
    """Under an ASCII locale (PYTHONIOENCODING=ascii; LC_ALL=C with PYTHONUTF8=0) the
    summary's `→` is written `->`: it used to fail with UnicodeEncodeError and a traceback
    after the model was written. An error line stays one line, exit status 1."""
    model = Path(__file__).resolve().parents[1] / "models" / "control_flow.onnx"
    out = tmp_path / "out.onnx"
    ascii_env = {"PYTHONIOENCODING": "ascii"}
    compiled = run_process("-m", "ge", "compile", str(model), "-o", str(out), env_vars=ascii_env)
    assert compiled.returncode == 0, compiled.stderr
    assert "Traceback" not in compiled.stderr and out.is_file()
    summary = next(line for line in compiled.stdout.splitlines() if line.startswith("nodes "))
    assert summary.startswith("nodes 6 -> 5 (-1) and 10 -> 9 (-1) in subgraphs, constants ")
    compiled.stdout.encode("ascii")  # nothing else non-ASCII slipped through either
    # the table measures its cells as written: `16->15` does not push its row out of line
    rows = [line.rstrip() for line in compiled.stdout.splitlines() if "| main_graph" in line]
    assert any("->" in row for row in rows) and len({len(row) for row in rows}) == 1, rows
    diffed = run_process("-m", "ge", "diff", str(model), str(out),
                         env_vars={"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""})
    assert diffed.returncode == 0 and "Traceback" not in diffed.stderr, diffed.stderr
    missing = run_process("-m", "ge", "compile", str(tmp_path / "none.onnx"), "-o",
                          str(tmp_path / "never.onnx"), env_vars=ascii_env)
    assert missing.returncode == 1 and missing.stderr.startswith("ge: [GE1102] ")
    assert not (tmp_path / "never.onnx").exists()


def test_an_ascii_table_stays_aligned_with_a_plugins_non_ascii_names(tmp_path: Path) -> None:
    """Trial R: a pass named `FuséÜ` in a folder `融合` made its row wider than the others
    under an ASCII locale (the cell measured before the stream escaped it)."""
    folder = tmp_path / "融合"
    folder.mkdir()
    (folder / "p_é.py").write_text(
        "from ge.passes import FusionBasePass, register_fusion_pass\n"
        "@register_fusion_pass(name='FuséÜ', stage='AfterInferShape')\n"
        "class Fuse(FusionBasePass):\n"
        "    def run(self, graph, context):\n"
        "        return True\n", encoding="utf-8")
    model = Path(__file__).resolve().parents[1] / "models" / "control_flow.onnx"
    compiled = run_process("-m", "ge", "compile", str(model), "-o", str(tmp_path / "o.onnx"),
                           "--pass-path", str(folder), env_vars={"PYTHONIOENCODING": "ascii"})
    assert compiled.returncode == 0, compiled.stderr
    rows = [line.rstrip() for line in compiled.stdout.splitlines() if "| main_graph" in line]
    assert any("Fus\\xe9\\xdc" in row for row in rows), rows
    assert len({len(row) for row in rows}) == 1, rows
    listed = run_process("-m", "ge", "passes", "list", "--pass-path", str(folder),
                         env_vars={"PYTHONIOENCODING": "ascii"})  # (trial S: it was not)
    assert listed.returncode == 0, listed.stderr
    rows = [line.rstrip() for line in listed.stdout.splitlines() if line.startswith("| ")]
    assert any("Fus\\xe9\\xdc" in row for row in rows), rows
    assert len({len(row) for row in rows}) == 1, rows


def test_only_ges_own_symbols_become_ascii_letters() -> None:
    """A user's name keeps what it says: `batch×µ` is escaped, not written `batchxu` (a dim
    name the model does not have, which `--dims` then refused; trial L)."""
    from ge.cli.output import _ASCII_HANDLER, _ascii_for

    codecs.register_error(_ASCII_HANDLER, _ascii_for)
    assert "nodes 6 → 5 … batch×µ é".encode("ascii", _ASCII_HANDLER) == (
        b"nodes 6 -> 5 ... batch\\xd7\\xb5 \\xe9")
