"""OpenAI's Responses API."""

from __future__ import annotations

from typing import Any, cast

from openai import AsyncOpenAI, AsyncStream
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseIncompleteEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
)

from memora.errors import LLMError
from memora.llm.openai_base import OpenAILLM, StructuredAsk
from memora.llm.protocol import CallInfo, Completion, OnDelta, Parsed, T
from memora.llm.sdk_errors import mid_stream, refusable, translated
from memora.llm.structured import text_format, validated
from memora.types import ChatMessage


class ResponsesLLM(OpenAILLM):
    """OpenAI's Responses API: instructions apart from the input, reasoning effort, SSE events;
    `store` (false unless the operator opts in), `safety_identifier` and `prompt_cache_key`."""

    api = "responses"
    usage_fields = ("input_tokens", "output_tokens")
    usage_details = ("input_tokens_details", "output_tokens_details")

    def _optional(self, call: CallInfo) -> dict[str, Any]:
        extra: dict[str, Any] = {
            "store": self.store,
            "prompt_cache_key": f"memora-{call.kind}",
        }
        if call.learner:
            extra["safety_identifier"] = call.learner
        effort = self._effort(call)
        if effort:
            extra["reasoning"] = {"effort": effort}
        extra = self._taken(extra)
        if self.max_output_tokens:
            extra["max_output_tokens"] = self.max_output_tokens
        return extra

    async def _create(
        self, client: AsyncOpenAI, instructions: str, messages: list[ChatMessage], call: CallInfo
    ) -> Completion:
        resp = await self._sent(
            client.responses.create,
            model=self.model,
            instructions=instructions,
            input=[m.as_dict() for m in messages],
            **self._optional(call),
        )
        return Completion(text=resp.output_text or "", usage=self._usage(resp.usage))

    async def _stream(
        self, instructions: str, messages: list[ChatMessage], on_delta: OnDelta, call: CallInfo
    ) -> Completion:
        """Text from `response.output_text.delta` events; the final text and usage from the
        `response.completed` (or `.incomplete`) event."""
        text = ""
        final: Any = None
        with translated():
            created = self._sent(
                self._client.responses.create,
                model=self.model,
                instructions=instructions,
                input=[m.as_dict() for m in messages],
                stream=True,
                **self._optional(call),
            )
            stream = cast(AsyncStream[ResponseStreamEvent], await refusable(created))
            async with stream:
                with mid_stream():
                    async for event in stream:
                        if isinstance(event, ResponseTextDeltaEvent):
                            text += event.delta
                            await on_delta(text)
                        elif isinstance(event, ResponseCompletedEvent | ResponseIncompleteEvent):
                            final = event.response
                            break
                        elif isinstance(event, ResponseFailedEvent):
                            error = event.response.error
                            code = error.code if error is not None else "failed"
                            raise LLMError(f"the model service failed mid-answer: {code}")
                        elif isinstance(event, ResponseErrorEvent):
                            why = event.code or "error"
                            raise LLMError(f"the model service failed mid-answer: {why}")
        if final is None:
            raise LLMError("the answer stream ended before the answer was complete")
        return Completion(text=final.output_text or text, usage=self._usage(final.usage))

    async def _parse(self, client: AsyncOpenAI, ask: StructuredAsk[T]) -> Parsed[T]:
        fmt: Any = {"type": "text"}
        if ask.mode == "json_schema":
            fmt = text_format(ask.schema)
        elif ask.mode == "json_object":
            fmt = {"type": "json_object"}
        text_config: Any = {"format": fmt}
        input_items: Any = [m.as_dict() for m in ask.messages]
        resp = await self._sent(
            client.responses.create,
            model=self.model,
            instructions=ask.instructions,
            input=input_items,
            text=text_config,
            **self._optional(ask.call),
        )
        usage = self._usage(resp.usage)
        refusal = next(
            (
                part.refusal
                for item in resp.output
                if item.type == "message"
                for part in item.content
                if part.type == "refusal"
            ),
            None,
        )
        if refusal is not None:
            return Parsed(text=refusal, usage=usage, problem="the model refused")
        text = resp.output_text or ""
        parsed, problem = validated(ask.schema, text)
        return Parsed(text=text, usage=usage, parsed=parsed, problem=problem)
