"""``python -m kvsim.traces.convert``: print the table of formats as traces/CONVERT.md
holds it (:func:`traces.convert.formats.markdown_table`)."""

from .formats import markdown_table

print(markdown_table(), end="")
