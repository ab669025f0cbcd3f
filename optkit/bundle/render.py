"""The bundle's template environment: Jinja2 over ``optkit/bundle/templates/`` and its two filters.

Imported only when a bundle is written (``optkit.bundle.writer``): planning never loads Jinja2.
Settings: ``StrictUndefined`` (a name the data lacks is an error, never an empty string),
``keep_trailing_newline``, ``trim_blocks`` + ``lstrip_blocks`` (a line holding only a ``{% %}``
tag leaves nothing behind), no autoescaping (``render_html`` escapes, for the one HTML file, the
measurement report), and template comments
written ``{## … ##}``, because ``{#`` is everyday shell (``${#ARRAY[@]}``).

The shell rule, tested over every ``*.sh.j2`` (tests/test_bundle.py): each ``{{ … }}`` in a shell
template ends in the one quoting filter ``sh``, without exception (constants are template text):

- ``{{ value | sh }}`` where the value stands as shell words: ``shlex.quote``; a list becomes
  space-separated words; a ``ShellVar`` becomes ``"$NAME"``; an int its digits.
- ``{{ value | sh(bare=True) }}`` where the script's shape puts the value inside ``"…"``,
  ``'…'`` or a comment: written as it is, so it must be a word ``shlex.quote`` leaves alone
  (letters, digits, ``_@%+=:,./-``); anything else refuses the bundle (``BundleWriteError``).
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

import jinja2
import yaml

from optkit.bundle import BundleWriteError
from optkit.errors import InternalError

_BARE = re.compile(r"[\w@%+=:,./-]*", re.ASCII)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def plain(text: str) -> bool:
    """Whether ``text`` needs no shell quoting: what ``shlex.quote`` leaves alone (its ``_find_unsafe``),
    and the empty string. Such text means the same inside "…", '…', a comment or as a word."""
    return bool(_BARE.fullmatch(text))


@dataclass(frozen=True)
class ShellVar:
    """One of the script's own variables in a command, written ``"$NAME"`` (expanded at run time)."""

    name: str

    def __post_init__(self):
        if not _NAME.fullmatch(self.name):
            raise InternalError(f"not a shell variable name: {self.name!r}")


@jinja2.pass_context
def sh(context: jinja2.runtime.Context, value: Any, bare: bool = False) -> str:
    """The one shell-quoting filter (see the module docstring for where each form goes)."""
    if isinstance(value, (list, tuple)):
        return " ".join(sh(context, item, bare) for item in value)
    if isinstance(value, ShellVar) and not bare:
        return f'"${value.name}"'
    script = (context.name or "a template").removesuffix(".j2")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InternalError(f"{script}: sh got {type(value).__name__} {value!r}, not a string or an int")
    text = str(value)
    if not bare:
        return shlex.quote(text)
    if not plain(text):
        raise BundleWriteError(f"{script}: {text!r} cannot be written into the script: it goes inside quotes "
                               "or a comment there, where only letters, digits and _@%+=:,./- are safe; "
                               "rename it in its profile or recipe")
    return text


def yaml_scalar(value: Any) -> str:
    """One YAML scalar, written as PyYAML writes it in a block mapping; as JSON (which YAML reads)
    when PyYAML would need more than one line for it."""
    text = yaml.safe_dump(value, allow_unicode=True, default_flow_style=False, width=1000)
    text = text.removesuffix("\n").removesuffix("\n...")
    return json.dumps(value) if "\n" in text else text


@functools.cache
def environment() -> jinja2.Environment:
    """The template environment (built once; templates are compiled on first use and cached)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("optkit.bundle", "templates"), undefined=jinja2.StrictUndefined,
        autoescape=False, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
        comment_start_string="{##", comment_end_string="##}")
    env.filters.update(sh=sh, yaml=yaml_scalar)
    return env


def render(template: str, **data: Any) -> str:
    """``templates/<template>`` rendered with ``data``."""
    return environment().get_template(template).render(**data)


@functools.cache
def html_environment() -> jinja2.Environment:
    """The environment of the HTML templates (the measurement report): the same settings, but every
    printed value is HTML-escaped."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("optkit.bundle", "templates"), undefined=jinja2.StrictUndefined,
        autoescape=True, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
        comment_start_string="{##", comment_end_string="##}")
    return env


def render_html(template: str, **data: Any) -> str:
    """``templates/<template>`` rendered with ``data``, every value HTML-escaped."""
    return html_environment().get_template(template).render(**data)
