"""Registration: descriptors, decorator validation (D11) and the registry look-ups."""

from __future__ import annotations

import threading

import pytest

from ge.errors import DuplicatePassNameError, PassRegisterError, PassRegisterTypeError
from ge.passes import (
    DecomposePass,
    FusionBasePass,
    PassDescriptor,
    PassStage,
    PatternFusionPass,
    clear_registered_passes,
    get_registered_pass_by_descriptor_key,
    get_registered_pass_dicts,
    get_registered_passes,
    register_decompose_pass,
    register_fusion_pass,
)
from ge.passes.registry import (
    PASS_KIND_DECOMPOSE,
    PASS_KIND_FUSION_BASE,
    PASS_KIND_PATTERN_FUSION,
    capture_registrations,
    publish_registrations,
    registrations_aside,
)

STAGE = PassStage.BEFORE_INFER_SHAPE


def _names() -> list[str]:
    return [d.pass_name for d in get_registered_passes()]


def get_pass_by_name(name: str) -> PassDescriptor:
    (found,) = [d for d in get_registered_passes() if d.pass_name == name]
    return found


def test_fusion_pass_descriptor_fields_and_bridge_dict() -> None:
    @register_fusion_pass(name="MyFusion", stage=STAGE)
    class MyFusion(FusionBasePass):
        def run(self, graph, context):
            return True

    (descriptor,) = get_registered_passes()
    assert descriptor == PassDescriptor(
        descriptor_key=f"{__name__}:MyFusion:MyFusion",
        pass_name="MyFusion",
        module_name=__name__,
        class_name="MyFusion",
        stage=STAGE,
        kind=PASS_KIND_FUSION_BASE,
        cls=MyFusion,
        op_types=[],
    )
    assert MyFusion.__ge_pass_descriptor__ is descriptor
    assert get_registered_pass_by_descriptor_key(descriptor.descriptor_key) is descriptor
    assert get_registered_pass_by_descriptor_key("nope") is None
    assert get_registered_pass_dicts() == [
        {
            "descriptor_key": f"{__name__}:MyFusion:MyFusion",
            "pass_name": "MyFusion",
            "module_name": __name__,
            "class_name": "MyFusion",
            "stage": "BeforeInferShape",
            "kind": "fusion_base",
            "op_types": [],
        }
    ]


def test_kinds_default_from_the_class_and_stage_accepts_its_string_value() -> None:
    @register_fusion_pass(name="P", stage="AfterInferShape")
    class P(PatternFusionPass):
        pass

    @register_decompose_pass(name="D", stage=STAGE, op_types=("Conv", "Gemm"))
    class D(DecomposePass):
        pass

    by_name = {d.pass_name: d for d in get_registered_passes()}
    assert by_name["P"].kind == PASS_KIND_PATTERN_FUSION
    assert by_name["P"].stage is PassStage.AFTER_INFER_SHAPE
    assert by_name["D"].kind == PASS_KIND_DECOMPOSE
    assert by_name["D"].op_types == ["Conv", "Gemm"]
    assert D.op_types == ["Conv", "Gemm"]
    assert by_name["D"].to_bridge_dict()["op_types"] == ["Conv", "Gemm"]


def test_registration_order_is_kept_and_clear_forgets_everything() -> None:
    for name in ("B", "A", "C"):
        register_fusion_pass(name=name, stage=STAGE)(type(name, (FusionBasePass,), {}))
    assert _names() == ["B", "A", "C"]
    clear_registered_passes()
    assert get_registered_passes() == []


@pytest.mark.parametrize(
    ("kwargs", "error_type", "message"),
    [
        ({"name": 3, "stage": STAGE}, PassRegisterTypeError, "name must be a non-empty string"),
        ({"name": "", "stage": STAGE}, PassRegisterError, "name must be a non-empty string"),
        ({"name": "  ", "stage": STAGE}, PassRegisterError, "name must be a non-empty string"),
        ({"name": "X", "stage": 1}, PassRegisterTypeError, "stage must be a PassStage"),
        ({"name": "X", "stage": "Later"}, PassRegisterError, "got 'Later'"),
        ({"name": "X", "stage": STAGE, "kind": "magic"}, PassRegisterError, "kind must be one"),
    ],
)
def test_fusion_factory_arguments_are_checked_eagerly(
    kwargs: dict, error_type: type, message: str
) -> None:
    with pytest.raises(error_type, match=message) as info:
        register_fusion_pass(**kwargs)
    assert info.value.code == "E13030"
    assert info.value.location is not None and info.value.location.file == __file__
    assert get_registered_passes() == []


def test_an_unknown_keyword_of_a_decorator_is_e13030_naming_it_and_the_accepted_ones() -> None:
    """`priority=5` was Python's bare TypeError (trial KK); it is E13030 at the user's line,
    naming the keyword, those the decorator takes, the pass, and how passes are ordered."""
    with pytest.raises(PassRegisterTypeError) as info:
        @register_fusion_pass(name="X", stage=STAGE, priority=5)  # type: ignore[call-arg]
        class X(FusionBasePass):
            pass
    err = info.value
    assert isinstance(err, TypeError) and err.code == "E13030" and err.pass_name == "X"
    assert err.message == (
        "register_fusion_pass got unknown keyword argument(s) 'priority'; it takes name, stage, "
        'kind: @register_fusion_pass(name="MyPass", stage=PassStage.AFTER_INFER_SHAPE) above '
        "the class; passes of one stage run in lexicographic order of their names: name them "
        "to order them")
    assert err.location is not None and err.location.file == __file__
    assert str(err).endswith(f"(pass X, at {err.location})")
    with pytest.raises(PassRegisterTypeError, match=r"unknown keyword argument\(s\) 'colour', "
                       r"'op_type'; it takes name, stage, op_types: ") as info:
        register_decompose_pass(name="D", stage=STAGE, op_types=["Conv"],  # type: ignore[call-arg]
                                colour=1, op_type="Gemm")
    assert "lexicographic" not in info.value.message
    assert get_registered_passes() == []


def test_wrong_targets_of_register_fusion_pass() -> None:
    decorate = register_fusion_pass(name="X", stage=STAGE)
    for target in (object, 3, FusionBasePass, PatternFusionPass):
        with pytest.raises(
            TypeError, match="register_fusion_pass expects a FusionBasePass subclass"
        ):
            decorate(target)

    class Decomposer(DecomposePass):
        pass

    with pytest.raises(PassRegisterTypeError, match="use register_decompose_pass") as info:
        decorate(Decomposer)
    assert info.value.code == "E13030"
    assert get_registered_passes() == []


def test_explicit_kind_must_match_the_class() -> None:
    class Plain(FusionBasePass):
        pass

    with pytest.raises(PassRegisterError, match="kind 'pattern_fusion' does not match Plain"):
        register_fusion_pass(name="X", stage=STAGE, kind="pattern_fusion")(Plain)
    register_fusion_pass(name="Y", stage=STAGE, kind="fusion_base")(Plain)
    assert _names() == ["Y"]


@pytest.mark.parametrize(
    ("op_types", "error_type", "message"),
    [
        ("Conv", TypeError, "register_decompose_pass op_types must be an iterable of strings"),
        (b"Conv", TypeError, "register_decompose_pass op_types must be an iterable of strings"),
        (5, TypeError, "register_decompose_pass op_types must be an iterable of strings"),
        ([], ValueError, "register_decompose_pass requires at least one op type"),
        (["Conv", 1], TypeError, "register_decompose_pass op_types must contain non-empty"),
        (["Conv", ""], TypeError, "register_decompose_pass op_types must contain non-empty"),
        (["com.microsoft."], ValueError,
         r"op type 'com.microsoft.' is neither an operator's name nor 'domain.OpType'"),
        ([".Gelu"], ValueError, r"op type '.Gelu' is neither an operator's name nor"),
    ],
)
def test_decompose_op_types_are_checked_when_the_factory_is_called(
    op_types: object, error_type: type, message: str
) -> None:
    with pytest.raises(error_type, match=message) as info:
        register_decompose_pass(name="D", stage=STAGE, op_types=op_types)  # type: ignore[arg-type]
    assert info.value.code == "E13030" and info.value.pass_name == "D"
    assert "(pass D" in str(info.value)
    assert get_registered_passes() == []


def test_register_decompose_pass_needs_a_decompose_pass() -> None:
    decorate = register_decompose_pass(name="D", stage=STAGE, op_types=["Conv"])

    class NotDecompose(FusionBasePass):
        pass

    with pytest.raises(TypeError, match="register_decompose_pass expects a DecomposePass subclass"):
        decorate(NotDecompose)
    assert get_registered_passes() == []


def test_duplicate_name_names_both_definitions() -> None:
    @register_fusion_pass(name="Same", stage=STAGE)
    class First(FusionBasePass):
        pass

    with pytest.raises(DuplicatePassNameError) as info:

        @register_fusion_pass(name="Same", stage=STAGE)
        class Second(FusionBasePass):
            pass

    err = info.value
    assert err.code == "E13030"
    assert isinstance(err, ValueError)
    assert err.message.startswith("python pass name already exists: Same")
    assert str(First.__ge_pass_source__) in err.message
    assert err.previous_location == First.__ge_pass_source__
    assert err.location is not None and err.location.file == __file__
    assert err.location.line != err.previous_location.line
    assert [d.cls for d in get_registered_passes()] == [First]


def test_duplicate_descriptor_key_is_rejected() -> None:
    class Twice(FusionBasePass):
        pass

    register_fusion_pass(name="K", stage=STAGE)(Twice)
    with pytest.raises(PassRegisterError, match="python pass descriptor_key already exists: "):
        register_fusion_pass(name="K", stage=STAGE)(Twice)
    assert _names() == ["K"]


def test_registry_is_thread_safe() -> None:
    classes = [type(f"T{i}", (FusionBasePass,), {}) for i in range(400)]
    barrier = threading.Barrier(8)

    def worker(offset: int) -> None:
        barrier.wait()
        for cls in classes[offset::8]:
            register_fusion_pass(name=cls.__name__, stage=STAGE)(cls)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(_names()) == sorted(cls.__name__ for cls in classes)


def _fusion(name: str) -> type:
    return type(name, (FusionBasePass,), {"run": lambda self, graph, context: True})


def test_registrations_aside_stay_out_of_the_registry_and_other_threads() -> None:
    """A block's registrations are checked against the registry (and the blocks it is
    nested in), never added to it; another thread sees none of them, even meanwhile."""
    register_fusion_pass(name="Global", stage=STAGE)(_fusion("Global"))
    seen_by_other: list[list[str]] = []
    with registrations_aside(), capture_registrations() as outer:
        register_fusion_pass(name="Outer", stage=STAGE)(_fusion("Outer"))
        with registrations_aside(), capture_registrations() as inner:
            register_fusion_pass(name="Inner", stage=STAGE)(_fusion("Inner"))
            for name in ("Global", "Outer", "Inner"):  # each table is checked
                with pytest.raises(DuplicatePassNameError, match=f"already exists: {name};"):
                    register_fusion_pass(name=name, stage=STAGE)(_fusion(name + "Again"))
            other = threading.Thread(target=lambda: seen_by_other.append(_names()))
            other.start()
            other.join()
        assert [d.pass_name for d in inner] == ["Inner"]
        assert [d.pass_name for d in outer] == ["Outer", "Inner"]
        register_fusion_pass(name="Inner", stage=STAGE)(_fusion("Inner"))  # (dropped with it)
    assert seen_by_other == [["Global"]]
    assert _names() == ["Global"]


def test_publish_moves_registrations_aside_out_as_a_whole() -> None:
    """`publish_registrations` adds what a block collected where the thread registers now
    (the enclosing block, else the registry): all of them, or none when one clashes."""
    with registrations_aside(), capture_registrations() as captured:
        register_fusion_pass(name="A", stage=STAGE)(_fusion("A"))
        register_fusion_pass(name="B", stage=STAGE)(_fusion("B"))
    assert _names() == []
    register_fusion_pass(name="B", stage=STAGE)(_fusion("Taken"))  # taken meanwhile
    taken = get_registered_passes()
    with pytest.raises(DuplicatePassNameError) as info:
        publish_registrations(captured)
    assert info.value.code == "E13030"
    assert info.value.message.startswith("python pass name already exists: B; B at ")
    assert "reuses the name of Taken at " in info.value.message
    assert get_registered_passes() == taken  # nothing added, A neither
    clear_registered_passes()
    with registrations_aside():
        publish_registrations(captured)  # into the block: dropped with it
        assert _names() == []
    publish_registrations(captured)
    publish_registrations(captured)  # those registered already stay as they are
    assert _names() == ["A", "B"]


def test_a_block_ignores_the_registrations_it_is_given() -> None:
    """Registrations in `ignoring` (an installed plugin a compilation leaves out) do not
    clash with the block's; the others still do, and the registry keeps both."""
    register_fusion_pass(name="Installed", stage=STAGE)(_fusion("Installed"))
    register_fusion_pass(name="Other", stage=STAGE)(_fusion("Other"))
    installed = get_pass_by_name("Installed")
    with registrations_aside(ignoring=[installed]), capture_registrations() as captured:
        with registrations_aside():  # (nested blocks ignore what the outer one does)
            register_fusion_pass(name="Installed", stage=STAGE)(_fusion("Copy"))
        register_fusion_pass(name="Installed", stage=STAGE)(_fusion("Copy2"))
        with pytest.raises(DuplicatePassNameError, match="already exists: Other;"):
            register_fusion_pass(name="Other", stage=STAGE)(_fusion("Other2"))
    assert [d.class_name for d in captured] == ["Copy", "Copy2"]
    assert [d.class_name for d in get_registered_passes()] == ["Installed", "Other"]


@pytest.mark.parametrize(("op_type", "why"), [
    ("Conv2D", "that is an Ascend operator, and ge's graphs hold ONNX operators: GE's Conv2D "
               "is ONNX's 'Conv'; write op_types=['Conv']"),
    ("BatchMatMulV2", "that is an Ascend operator, and ge's graphs hold ONNX operators: GE's "
                      "BatchMatMulV2 is ONNX's 'MatMul'; write op_types=['MatMul']"),
    ("relu", "ONNX's operator is spelt 'Relu'; write op_types=['Relu']"),
])
def test_an_op_type_no_node_can_have_is_a_definition_warning(op_type: str, why: str) -> None:
    """Trial G: `op_types=["Conv2D"]` (GE's sample vocabulary) registered a pass that never
    ran, silently; the warning points at the decorator's line and names the ONNX type."""
    import inspect

    from ge.errors import PassDefinitionWarning

    with pytest.warns(PassDefinitionWarning) as caught:
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        @register_decompose_pass(name="Ported", stage=STAGE, op_types=["Add", op_type])
        class Ported(DecomposePass):
            def replacement(self, node):
                return None

    (warning,) = caught
    assert str(warning.message) == (
        f"pass Ported: op_types names {op_type!r}, which no node has: {why} "
        f"(at {__file__}:{line})")
    assert (warning.filename, warning.lineno) == (__file__, line)
    assert _names() == ["Ported"]  # registered all the same: a warning, not an error


def test_onnx_and_custom_op_types_register_without_a_warning() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @register_decompose_pass(name="Fine", stage=STAGE,
                                 op_types=["Gemm", "LayerNormalization", "AddCustom"])
        class Fine(DecomposePass):
            def replacement(self, node):
                return None
