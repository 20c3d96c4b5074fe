"""One view model of each result, built from its JSON and drawn by both renderers.

A view is what a result shows, as text: an :class:`~ctxplan.report.view.base.Answer` (a title
and labelled facts, the brief ones first) and :class:`~ctxplan.report.view.base.TableView` s
(columns, rows of cells, a caption, notes under the table). Each module reads the JSON of one
kind of result, the same keys whether the result was computed now (``result.to_dict()``) or
saved (``--json``), so a saved result and a live one look the same:

=================  ===========================================================
module             result (its JSON)
=================  ===========================================================
``eval``           ``EvalResult`` (``ctxplan eval``)
``solve``          ``SolveResult`` (``ctxplan solve``; each point of a sweep)
``sweep``          ``SweepResult`` (``ctxplan sweep``, a study of several S)
``capacity``       ``CapacityResult`` (``ctxplan capacity``)
``sensitivity``    ``SensitivityStudy`` (``ctxplan sensitivity``)
``validation``     ``ValidationReport`` (``ctxplan validate``, the report's rows)
=================  ===========================================================

The terminal draws them at 80 columns (:mod:`ctxplan.report.terminal`; what each command
prints, in which order: :mod:`ctxplan.report.screens`), the HTML page as sections
(:mod:`ctxplan.report.page.view`). A column marked ``detail`` is the page's only.

**A new result field** (a new key in a result's ``to_dict()``) is shown by one change: a fact in
the module's ``answer`` (``brief=True`` if it is part of the answer itself), or a column (its
cell in the row) of one of its tables. Both renderers pick it up. Read it with ``.get`` when
results saved before it lack it.
"""
