"""What model servers have shown they refuse, learned from their answers and kept for the
process, per model: optional request parameters (`store`, `safety_identifier`,
`prompt_cache_key`, `reasoning`), streamed requests, and the structured-output form, per schema
when the server refused one schema and for every schema when it refused the form itself. One
`Learned` may be shared by the clients of one server (the app shares it): each refusal is
learned, and logged, once."""

from __future__ import annotations

import logging

from memora.llm.structured import STRUCTURED_MODES, StructuredMode

log = logging.getLogger(__name__)

OPTIONAL_PARAMS = ("store", "safety_identifier", "prompt_cache_key", "reasoning")
"""The request parameters Memora sends where an API takes them, and drops once refused."""


def _lower(a: StructuredMode, b: StructuredMode) -> StructuredMode:
    return max(a, b, key=STRUCTURED_MODES.index)


class Learned:
    """Refusals seen, per model (see the module docstring)."""

    def __init__(self) -> None:
        self._params: set[tuple[str, str]] = set()  # (model, parameter)
        self._no_stream: set[str] = set()
        self._form: dict[str, StructuredMode] = {}  # model → the form every schema starts at
        self._schema_form: dict[tuple[str, str], StructuredMode] = {}  # (model, schema name)
        self._confirmed: set[str] = set()  # models that have answered a structured call

    # -- parameters ----------------------------------------------------------------------------
    def takes(self, model: str, param: str) -> bool:
        return (model, param) not in self._params

    def refuse_param(self, model: str, param: str, why: object) -> None:
        if (model, param) in self._params:
            return
        self._params.add((model, param))
        log.warning(
            "the model server refuses `%s` for %s (%s); it is no longer sent", param, model, why
        )

    # -- streaming -----------------------------------------------------------------------------
    def streams(self, model: str) -> bool:
        return model not in self._no_stream

    def refuse_stream(self, model: str) -> None:
        if model not in self._no_stream:
            self._no_stream.add(model)
            log.warning("the model server refuses streamed requests; replies are not streamed")

    # -- structured output ---------------------------------------------------------------------
    def form(self, model: str, schema: str | None = None) -> StructuredMode:
        """How structured output is asked for now (it only moves down STRUCTURED_MODES): the
        server's form, or lower for a schema the server refused."""
        mode = self._form.get(model, STRUCTURED_MODES[0])
        if schema is not None:
            mode = _lower(mode, self._schema_form.get((model, schema), STRUCTURED_MODES[0]))
        return mode

    def refuse_form(
        self, model: str, mode: StructuredMode, schema: str | None, why: object
    ) -> StructuredMode:
        """`mode` refused, for `schema` alone or (None) for every schema: the next form."""
        lower = STRUCTURED_MODES[STRUCTURED_MODES.index(mode) + 1]
        if schema is None:
            self._form[model] = _lower(self._form.get(model, lower), lower)
            log.warning(
                "the model server refuses structured output as %s (%s); using %s from now on",
                mode,
                why,
                lower,
            )
        else:
            self._schema_form[(model, schema)] = lower
            log.warning(
                "the model server refuses the schema %s as %s (%s); %s uses %s from now on, "
                "other schemas keep theirs",
                schema,
                mode,
                why,
                schema,
                lower,
            )
        return lower

    def confirmed(self, model: str) -> bool:
        """Whether this model's server has answered a structured call (until then a refused
        form is not retried by the SDK: it cannot succeed)."""
        return model in self._confirmed

    def confirm(self, model: str) -> None:
        self._confirmed.add(model)
