"""Each option is declared once (ctxplan.config.options): the command line, the API signatures,
the study / point file schemas and the flag-to-field paths all follow that one declaration."""

from __future__ import annotations

import inspect
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from ctxplan import api
from ctxplan.cli import app
from ctxplan.cli.options import CLI_ONLY, command
from ctxplan.config.json_schema import json_schema
from ctxplan.config.options import (
    EvalOptions,
    Opt,
    SimOptions,
    SolveOptions,
    SweepOptions,
    declared,
    file_options,
    with_options,
)
from ctxplan.config.study_schema import SCHEMAS, file_values

COMMANDS = {"eval": EvalOptions, "solve": SolveOptions, "sweep": SweepOptions}


def _params(name: str) -> dict[str, Any]:
    group = typer.main.get_command(app)
    return {p.name: p for p in group.commands[name].params}  # type: ignore[attr-defined]


@pytest.mark.parametrize("command_name", list(COMMANDS))
def test_every_option_is_on_the_command_line_as_declared(command_name: str) -> None:
    params = _params(command_name)
    for name, d in declared(COMMANDS[command_name]).items():
        p = params[name]
        assert d.flag in p.opts, (name, p.opts)
        assert p.help == d.opt.help
        assert p.default == d.cli_default
        assert p.is_flag == (d.cli_type() is bool)


@pytest.mark.parametrize("kind", ["study", "point"])
def test_file_fields_follow_the_declarations(kind: str) -> None:
    schema = json_schema(kind)
    for name, d in file_options(kind).items():
        head, _, rest = d.file_path.partition(".")
        prop = schema["properties"][head]
        if rest:
            sub = schema["$defs"][prop["$ref"].rsplit("/", 1)[1]]
            prop, required = sub["properties"][rest], sub.get("required", [])
        else:
            required = schema["required"]
        assert prop["description"].startswith(d.opt.help), name
        assert (d.file_path.rsplit(".", 1)[-1] in required) == d.opt.required_in_file, name
        if not d.opt.required_in_file:
            assert prop.get("default") == d.default, name


@pytest.mark.parametrize(("fn", "group"), [
    (api.eval_config, EvalOptions), (api.evaluate, EvalOptions),
    (api.solve_request, SolveOptions), (api.solve, SolveOptions), (api.sweep, SweepOptions),
])
def test_api_signatures_show_every_option_with_its_default(fn: Any, group: type) -> None:
    params = inspect.signature(fn).parameters
    for name, d in declared(group).items():
        assert params[name].default == d.default and params[name].kind is params[name].KEYWORD_ONLY
        assert d.opt.help in (fn.__doc__ or "")


def test_an_unknown_keyword_is_a_type_error_as_in_any_function() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'bach'"):
        api.eval_config("llama3.1-8b", "h100-sxm", "8K", "decode", 1, bach=2)  # type: ignore[call-arg]


@pytest.mark.parametrize("argv", [["--help"], ["eval", "--help"], ["store", "--help"],
                                  ["store", "clear", "--help"]])
def test_flags_show_no_value_placeholder(argv: list[str]) -> None:
    # typer prints "--json <bool>" for a flag without a metavar, though "--json true" fails.
    text = CliRunner().invoke(app, argv, env={"COLUMNS": "200"}).stdout
    assert "--help" in text and "<bool>" not in text


def test_flag_paths_are_file_fields() -> None:
    for kind in ("study", "point"):
        fields = SCHEMAS[kind].model_fields
        for d in file_options(kind).values():
            head, _, rest = d.file_path.partition(".")
            assert head in fields
            if rest:
                assert rest in fields[head].annotation.model_fields  # type: ignore[union-attr]


def test_adding_an_option_is_one_declaration() -> None:
    """What a new option gets from its declaration alone (docs/architecture.md)."""

    class Extended(SimOptions, total=False):
        headroom_gb: Annotated[float | None, Opt(None, "Memory kept free per chip.", unit="GB")]

    new = declared(Extended)["headroom_gb"]
    assert new.flag == "--headroom-gb" and new.file_path == "headroom_gb"

    @with_options(Extended)
    def plan(model: str, **options: Any) -> dict[str, Any]:
        """Plan."""
        return options

    assert inspect.signature(plan).parameters["headroom_gb"].default is None
    assert "Memory kept free per chip." in (plan.__doc__ or "")

    seen: dict[str, Any] = {}
    cli = typer.Typer()

    @command(cli, "plan", groups=(Extended,), cli=("as_json",))
    def plan_cmd(inv: Any) -> None:
        seen.update(inv.of(Extended))

    @cli.command("other")
    def other() -> None:  # a second command keeps typer from collapsing the group
        pass

    runner = CliRunner()
    assert runner.invoke(cli, ["plan", "--headroom-gb", "7.5"]).exit_code == 0
    assert seen["headroom_gb"] == 7.5   # a float flag is parsed as one
    assert "Memory kept free per chip." in runner.invoke(cli, ["plan", "--help"]).stdout


def test_file_values_are_what_the_api_takes(tmp_path: Any) -> None:
    from tests.helpers.inputs import study_data, write_yaml

    study = api.load_study(write_yaml(tmp_path / "s.yaml", study_data() | {
        "kv_tiers": "default", "periodic_shortcut": True}))
    assert set(study.solve_options()) == set(declared(SolveOptions))
    assert study.kv_tiers == () and study.periodic_shortcut is True
    spec = SCHEMAS["study"].model_validate(study_data())
    assert set(file_values("study", spec)) == set(file_options("study"))


def test_cli_only_options_are_not_file_fields() -> None:
    for kind in ("study", "point"):
        assert not set(CLI_ONLY) & set(SCHEMAS[kind].model_fields)


def test_every_file_field_is_documented() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "study-files.md").read_text()
    for kind in ("study", "point"):
        for d in file_options(kind).values():
            assert f"`{d.file_path}`" in text, f"docs/study-files.md: document `{d.file_path}`"
