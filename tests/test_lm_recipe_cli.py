"""The trainers' command lines: a flag per hyperparameter, its docstring as the help."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import pytest

from specialists.lm_recipe import RecipeArgs, add_arguments, from_arguments


@dataclass
class _Args(RecipeArgs):
    projects: tuple[str, ...] = ("a", "b")
    """Projects to read."""
    files: list[str] = field(default_factory=list)
    stdlib: bool = True
    """Add the standard library."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_arguments(parser, _Args)
    return parser


def test_help_shows_each_fields_docstring_and_default(capsys) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Projects to read. (default: a,b)" in out
    assert "Peak learning rate; linear warm-up, then cosine decay over the time budget. (default: 0.001)" in out
    assert "--stdlib, --no-stdlib Add the standard library." in out


def test_values_parse_into_the_dataclass() -> None:
    args = from_arguments(_Args, _parser().parse_args(["--projects", "x,y", "z", "--files", "f.py",
                                                       "--no-stdlib", "--minutes", "1.5"]))
    assert args.projects == ("x", "y", "z") and args.files == ["f.py"]
    assert args.stdlib is False and args.minutes == 1.5 and args.n_layer == RecipeArgs().n_layer
    assert from_arguments(_Args, _parser().parse_args([])) == _Args()


def test_the_device_resolves_or_is_refused_with_what_to_use() -> None:
    import torch

    from specialists.lm_recipe import resolve_device

    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="cpu, cuda or auto"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no GPU"):
            resolve_device("cuda")


def test_training_from_examples_needs_the_file(capsys) -> None:
    from specialists.lm_recipe import main

    with pytest.raises(SystemExit):
        main([])
    assert "--examples FILE is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--examples", "/nonexistent/ex.jsonl.gz"])
    assert "cannot read the examples" in capsys.readouterr().err
