"""Profile text made safe to print: on a terminal, and in Markdown for a
pull-request comment.

A profile is data from wherever the run happened, and its strings (operator
and file names, host names, paths, messages of the profiler) reach a
terminal and a PR comment through advisor. Two things must not pass:

* **Control characters.** An operator named ``"\\x1b]52;c;...\\x07"`` would
  write the reader's clipboard (OSC 52), set the window title, move the
  cursor or clear the screen the moment its name is printed; a raw newline
  forges whole lines of output; bidirectional overrides make text read
  differently from what it is. :func:`clean` removes every C0 and C1
  control character, DEL and the bidirectional embedding, override and
  isolate marks; tabs and line breaks become spaces (or stay, for text that
  is printed as several lines).
* **Live references in Markdown.** GitHub and GitLab turn ``@user`` and
  ``@org/team`` into mentions (a notification to whoever is named),
  ``#123``, ``GH-123`` and ``!123`` into links to issues and merge requests,
  and bare ``https://...`` / ``www....`` text into links.
  :func:`inert_markdown` puts a zero-width joiner (U+200D) after each ``@``
  and ``#``, after ``!`` and ``GH-`` before a digit, inside each ``://`` and
  after ``www``: the text
  reads the same and nothing is linked or notified. (Text inside a code
  span or fence is never linked; :func:`clean` is enough there.)

Rendered HTML needs neither: Jinja2 escapes it and the page is never a
terminal.
"""

from __future__ import annotations

import re

#: C0 controls, DEL, C1 controls; the bidirectional embeddings, overrides
#: (U+202A-U+202E) and isolates (U+2066-U+2069).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: Tab, line feed, carriage return and the Unicode line/paragraph separators.
_BREAK = re.compile("[\t\n\r\u0085\u2028\u2029]")
_ZWJ = "\u200d"
#: Where a zero-width joiner goes: after @ (mentions) and # (issue references),
#: after ! and GH- before a digit (merge requests, issues), inside :// and
#: after www. (links).
_LIVE = re.compile(r"[@#]|!(?=\d)|(?i:\bgh-)(?=\d)|:(?=//)|(?i:\bwww)(?=\.)")


def clean(text: object, multiline: bool = False) -> str:
    """``text`` without control characters: safe to print on a terminal.
    Tabs and line breaks become spaces, unless ``multiline`` (then line
    feeds and tabs stay, a carriage return becomes a line feed)."""
    s = str(text)
    if multiline:
        s = s.replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n").replace("\u2029", "\n")
        return _CONTROL.sub("", s.replace("\x85", "\n"))
    return _CONTROL.sub("", _BREAK.sub(" ", s))


def inert_markdown(text: object) -> str:
    """``clean(text)`` with mentions, issue references and bare links made
    inert for GitHub/GitLab Markdown (see the module doc)."""
    return _LIVE.sub(lambda m: m.group(0) + _ZWJ, clean(text))
