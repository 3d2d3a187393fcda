"""The Chat Completions API: what OpenAI-compatible servers speak (Ollama, vLLM, llama.cpp)."""

from __future__ import annotations

from typing import Any, cast

from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletionChunk

from memora.errors import LLMError
from memora.llm.openai_base import OpenAILLM, StructuredAsk
from memora.llm.protocol import CONTEXT_EXCEEDED, CallInfo, Completion, OnDelta, Parsed, T, Usage
from memora.llm.sdk_errors import mid_stream, refusable, translated
from memora.llm.structured import json_schema, response_format, validated
from memora.types import ChatMessage


class ChatCompletionsLLM(OpenAILLM):
    """Chat Completions: what every OpenAI-compatible server speaks; the instructions become the
    system message. The reasoning effort is `reasoning_effort`; `store` is only sent when the
    operator opts in (the API keeps nothing by default, and compatible servers do not know it);
    a server that refuses one of them is remembered (see `OpenAILLM._learning`)."""

    api = "chat_completions"
    usage_fields = ("prompt_tokens", "completion_tokens")
    usage_details = ("prompt_tokens_details", "completion_tokens_details")

    def _optional(self, call: CallInfo) -> dict[str, Any]:
        extra: dict[str, Any] = {"prompt_cache_key": f"memora-{call.kind}"}
        if self.store:
            extra["store"] = True
        if call.learner:
            extra["safety_identifier"] = call.learner
        effort = self._effort(call)
        if effort:
            extra["reasoning_effort"] = effort
        extra = self._taken(extra)
        # `max_tokens`, which every compatible server reads (llama.cpp's, Ollama, vLLM);
        # OpenAI's reasoning models want `max_completion_tokens`: use the Responses API there.
        if self.max_output_tokens:
            extra["max_tokens"] = self.max_output_tokens
        return extra

    @staticmethod
    def _messages(instructions: str, messages: list[ChatMessage]) -> Any:
        out = [{"role": "system", "content": instructions}]
        # "developer" is a Responses/OpenAI role; older compatible servers only know "system".
        out += [
            {"role": "system" if m.role == "developer" else m.role, "content": m.content}
            for m in messages
        ]
        return out

    async def _create(
        self, client: AsyncOpenAI, instructions: str, messages: list[ChatMessage], call: CallInfo
    ) -> Completion:
        resp = await self._sent(
            client.chat.completions.create,
            model=self.model,
            messages=self._messages(instructions, messages),
            **self._optional(call),
        )
        if not resp.choices:
            raise LLMError("the model returned no choices")
        text = resp.choices[0].message.content or ""
        return Completion(text=text, usage=self._usage(resp.usage))

    async def _stream(
        self, instructions: str, messages: list[ChatMessage], on_delta: OnDelta, call: CallInfo
    ) -> Completion:
        """`choices[0].delta.content` pieces until a finish_reason; usage from the last chunk
        (`stream_options.include_usage`)."""
        text = ""
        finished = False
        usage: object = None
        with translated():
            created = await refusable(
                self._sent(
                    self._client.chat.completions.create,
                    model=self.model,
                    messages=self._messages(instructions, messages),
                    stream=True,
                    stream_options={"include_usage": True},
                    **self._optional(call),
                )
            )
            stream = cast(AsyncStream[ChatCompletionChunk], created)
            async with stream:
                with mid_stream():
                    async for chunk in stream:
                        if chunk.usage is not None:
                            usage = chunk.usage
                        for choice in chunk.choices:
                            if choice.index != 0:
                                continue
                            if choice.delta is not None and choice.delta.content:
                                text += choice.delta.content
                                await on_delta(text)
                            if choice.finish_reason is not None:
                                finished = True
        if not finished:
            raise LLMError("the answer stream ended before the answer was complete")
        return Completion(text=text, usage=self._usage(usage))

    async def _parse(self, client: AsyncOpenAI, ask: StructuredAsk[T]) -> Parsed[T]:
        extra = self._optional(ask.call)
        if ask.mode == "json_schema":
            extra["response_format"] = response_format(ask.schema)
        elif ask.mode == "json_object":  # llama.cpp's server constrains the output to `schema`
            extra["response_format"] = {
                "type": "json_object",
                "schema": json_schema(ask.schema),
            }
        resp = await self._sent(
            client.chat.completions.create,
            model=self.model,
            messages=self._messages(ask.instructions, ask.messages),
            **extra,
        )
        if not resp.choices:
            raise LLMError("the model returned no choices")
        choice = resp.choices[0]
        msg = choice.message
        usage = self._usage(resp.usage)
        if msg.refusal:
            return Parsed(text=msg.refusal, usage=usage, problem="the model refused")
        text = msg.content or ""
        parsed, problem = validated(ask.schema, text)
        if parsed is None and choice.finish_reason == "length" and self._cut_by_context(usage):
            # llama.cpp answers a prompt that fits and stops the answer where its context ends
            # (it lowers max_tokens to the room left): asking again, longer, cannot fit more.
            # Said as the server says a prompt too long, so the caller can ask in fewer tokens.
            self.learned.confirm(self.model)  # the server took the form: it answered 200
            raise LLMError(
                f"the answer was cut at the end of the model's context ({usage.input_tokens} "
                f"prompt + {usage.output_tokens} answer tokens)",
                CONTEXT_EXCEEDED,
            )
        return Parsed(text=text, usage=usage, parsed=parsed, problem=problem)

    def _cut_by_context(self, usage: Usage) -> bool:
        """Whether an answer that stopped for length stopped before the cap it was sent with
        (`max_tokens`): then the server's context ended it. Without a cap, the server's limit
        is its context; with one and no usage reported, it cannot be told: no."""
        if not self.max_output_tokens:
            return True
        return 0 < usage.output_tokens < self.max_output_tokens
