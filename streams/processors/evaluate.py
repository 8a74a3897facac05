"""interactions -> evaluations in one processor (``kafka.topology = "fused"``, the default): every stage of
an interaction runs here (pipeline.evaluator.Evaluator), so an interaction costs two Kafka messages instead
of the staged topology's eight (five read, three written by the worker).

Each Evaluation sent goes into this worker's sink batch at once, without a decode
(``streams.handoff``): under a backlog rows land while the interactions are still being judged.

Stages fail as they do in the staged topology: a conversion that fails dead-letters the interaction
(stage "convert"); NLI or refusal that fails (its judge gave up) is dead-lettered under its own name and
the Evaluation is still sent, incomplete (``missing`` names the stage). An Evaluation that cannot be sent
is dead-lettered as stage "evaluate", a message that does not validate as "validate". Relevance is scored
by the evaluator (``pipeline.metrics.relevance.score_relevance``): a failure leaves it out and marks it
missing."""

from __future__ import annotations

import logging

from pipeline.privacy.mask import Masked
from schemas.errors import StageError
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.results import Stage
from streams.handoff import Place
from streams.processors.base import StageFailures
from streams.processors.entry import EntryProcessor

log = logging.getLogger(__name__)


def cause_of(failure: StageError) -> Exception:
    """What made a stage fail (the judge's error), else the StageError itself."""
    cause = failure.__cause__
    return cause if isinstance(cause, Exception) else failure


class EvaluateProcessor(EntryProcessor):
    """Every stage of an interaction in one processor; masking and sampling come first
    (streams.processors.entry)."""

    name = "groundwatch.evaluate"
    stage = "evaluate"

    async def judge(self, message: Interaction, judged: Masked) -> None:
        outcome = await self.resources.evaluator.evaluate_apart(judged.interaction, judged.originals)
        # each under its stage with the judge's own error, as the staged judge processor files them
        failures: list[tuple[Stage, Exception]] = [(f.stage, cause_of(f)) for f in outcome.failures]
        try:
            place = await self.ctx.send(
                self.ctx.names.evaluations, message.interaction_id, outcome.evaluation
            )
        except Exception as exc:  # dead-lettered as stage "evaluate", with the stages that failed apart
            failures.insert(0, (self.stage, exc))
        else:
            await self.sent(outcome.evaluation, place)
        if failures:  # one dead letter per failure, each under its stage with its own error (on_error)
            raise StageFailures(failures)

    async def sent(self, evaluation: Evaluation, place: Place) -> None:
        """In a judging process (``streams.processes``), which has no sink: charge the judge budget here
        (``pipeline.sampling``, per process). Else hand the Evaluation to this worker's sink."""
        if self.resources.judging_only:
            self.resources.sampler.record([evaluation])
            return
        await self.hand_to_sink(evaluation, place)

    async def hand_to_sink(self, evaluation: Evaluation, place: Place) -> None:
        """The sent Evaluation, into this worker's sink batch at once (``streams.handoff``): its row lands
        without waiting for the message to come back, which the sink then only acks. A batch that fills
        here is written here; when that write fails the rows stay in the batch (unacked) and the sink's
        timer writes them, logging the failure."""
        sink, written = self.resources.sink, self.resources.handoff.sent(place)
        try:
            await sink.add(evaluation, written)
        except Exception as exc:  # the flush of a full batch failed: its rows went back into the batch
            log.debug("sink: a batch filled by %s was not written yet: %r", evaluation.interaction_id, exc)
