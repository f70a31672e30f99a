"""A window's prompt fitted to the backbone's budget (oracle.backbones.
openai_compat): built by the estimate, then counted by the server's
tokenizer where the backbone names one (oracle.backbones.dialects) and
rebuilt smaller while the count is over."""

from __future__ import annotations

from oracle.backbones import http
from oracle.backbones.completion import COUNT_FAILURES, COUNT_REPLY_BYTES
from oracle.backbones.dialects import token_count_read, token_count_request
from oracle.prompts import PromptBudgetError, prompt_build


class PromptFitting:
    """The prompt-fitting half of OpenAICompatBackbone, with the backbone's
    settings on ``self``."""

    async def _count(self, client, messages) -> int | None:
        """The prompt's tokens by the server's tokenizer (``tokenizer``), or None
        when it has none or the count failed (the estimate stands then). Raw
        tokenizers count the contents; the chat template's framing is what the
        budget's margin is for."""
        asked = token_count_request(
            self.tokenizer, root=self.root_url, model=self.model, messages=messages
        )
        if asked is None:
            return None
        try:
            reply = await self._count_request(client, *asked)
            if reply.status != 200:
                return None
            return token_count_read(self.tokenizer, reply.json(), messages)
        except COUNT_FAILURES:
            return None

    async def _count_request(self, client, url: str, body: dict) -> http.Reply:
        return await http.arequest(
            client,
            "POST",
            url,
            json=body,
            deadline_seconds=self.timeout_seconds,
            max_bytes=COUNT_REPLY_BYTES,
        )

    def _build(self, context, budget: int | None):
        return prompt_build(
            context=context,
            template=self.template,
            budget=budget,
            chars_per_token=self.ratio(),
        )

    def _over_budget(self, context, detail: str, reserve: int = 0) -> str:
        """A window whose prompt does not fit, in the README's figures: the
        budget as its formula (not an intermediate target of the compression)
        and what a repair turn held back."""
        budget = self.budget_formula or str(self.prompt_budget)
        held = (
            f", less {reserve} held back for the repair turn's reply and correction"
            if reserve
            else ""
        )
        return (
            f"The prompt of window {context.window_id} does not fit its budget of "
            f"{budget} tokens{held} even compressed: {detail} Raise the backbone's "
            "context window or lower its reply tokens."
        )

    async def _fitted(
        self, client, context, budget: int | None, semaphore, reserve: int = 0
    ):
        """The prompt within ``budget``, by the estimate and then, where the
        server counts tokens, by its count: rebuilt at a budget scaled by how
        far the count was over, at most three times. Returns the prompt and its
        count (None without a tokenizer). Building and counting take one of
        the requests in flight: the prompt is built when the request can go,
        with the ratios the batch has seen by then, and a server that serves
        one request at a time does not keep counts waiting behind completions
        until they time out."""

        async def built(target):
            async with semaphore:
                try:
                    prompt = self._build(
                        context, None if target is None else max(1, target)
                    )
                except PromptBudgetError as error:
                    estimated = getattr(error, "estimated", None)
                    raise PromptBudgetError(
                        self._over_budget(
                            context,
                            f"it needs about {estimated} tokens by the estimate."
                            if estimated
                            else str(error),
                            reserve,
                        )
                    ) from None
                return prompt, await self._count(client, prompt.messages)

        if budget is not None:
            budget = budget - reserve
        prompt, counted = await built(budget)
        target = budget
        for _ in range(3):
            if counted is None or budget is None or counted <= budget:
                break
            target = int(target * budget / counted * 0.97) - 8
            prompt, counted = await built(target)
        if counted is not None and budget is not None and counted > budget:
            raise PromptBudgetError(
                self._over_budget(
                    context, f"it is {counted} tokens by the server's count.", reserve
                )
            )
        return prompt, counted
