"""Asking the reader and the judge about every probe: bounded concurrency,
progress, a cost limit and a dry run.

``Answering`` is the replay's probe hook: as soon as a strategy has built a
probe's context, it builds the reader's prompt, looks it up in the model cache
and hands the rest (answer, then grade) to a pool of ``concurrency`` threads, so
requests run while the replay goes on. At most ``2 * concurrency`` probes wait
at once (the replay pauses beyond that). ``finish`` waits for the last answers
and returns them as rows keyed by strategy, transcript and probe, which the
composition root joins to probes.csv.

Cost: before a probe's calls are sent, an upper estimate of their cost (the
prompt's ``ceil(chars / 4)`` tokens and ``max_tokens`` of answer, for the reader
and a model judge) is reserved against ``max_usd``; answers from the cache cost
nothing. Once the next probe would pass the limit, no more calls are made: the
probes already sent finish, the transcript being replayed is replayed to its end
without answers, and the run stops there, marked incomplete. The run's spend
may pass ``max_usd`` only by what the estimates missed.

A dry run makes no request: it replays, builds every prompt, looks it up in the
cache and counts the calls a run would make, their estimated prompt tokens and
their bounded answer tokens and cost.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from memlab.errors import InputError, MemlabError
from memlab.lab.judges import Judge, Question, Verdict, question_of
from memlab.lab.planted import Payload, injection_followed, planted_in_context, planted_turns
from memlab.lab.readers import Reader
from memlab.lab.strategies.base import Context
from memlab.lab.transcripts import Transcript, Turn
from memlab.memory import Completion, estimate_tokens
from memlab.memory.agent import Message
from memlab.progress import bar

KEY = ["strategy", "transcript", "probe"]
"""The columns that join answer rows to probes.csv."""

COST_LIMIT = "skipped: reader.max_usd reached"


@dataclass
class AnswerSettings:
    """How a run with a reader asks (the ``reader`` node's lab keys).

    Attributes:
        concurrency: requests in flight at most (reader and judge together).
        max_usd: stop making calls once this many US dollars would be spent in
            this run (None: no limit); answers from the cache are free.
        dry_run: count the calls, tokens and cost a run would make; send nothing
            and write nothing.
        preflight: check the endpoints before any work (``GET /models``); false
            runs fully offline when every answer is cached.
    """

    concurrency: int = 16
    max_usd: float | None = None
    dry_run: bool = False
    preflight: bool = True

    def __post_init__(self) -> None:
        c = self.concurrency
        if not isinstance(c, int) or isinstance(c, bool) or not 1 <= c <= 256:
            raise InputError(f"concurrency must be an integer in 1..256, got {c!r}")
        m = self.max_usd
        if m is not None and (not isinstance(m, int | float) or not math.isfinite(m) or m <= 0):
            raise InputError(f"max_usd must be > 0 (US dollars) or null, got {m!r}")


@dataclass
class Tally:
    """Calls, tokens and money. In a dry run: what a run would make (prompt tokens
    estimated as ceil(chars / 4), answer tokens and cost as upper bounds); in a
    run: what this run sent and spent (cached answers excluded). ``cost_usd`` is
    the total, ``judge_usd`` the judge's part of it."""

    probes: int = 0
    reader_calls: int = 0
    reader_cached: int = 0
    reader_prompt_tokens: int = 0
    reader_completion_tokens: int = 0
    judge_calls: int = 0
    judge_cached: int = 0
    judge_prompt_tokens: int = 0
    judge_completion_tokens: int = 0
    cost_usd: float = 0.0
    judge_usd: float = 0.0
    skipped: int = 0


class CostMeter:
    """Money spent in this run and money reserved for calls in flight (thread-safe).

    Args:
        limit: US dollars (None: no limit).
    """

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.spent = 0.0
        self.reserved = 0.0
        self._lock = threading.Lock()

    def reserve(self, amount: float) -> bool:
        """Reserve ``amount``; False (nothing reserved) if it would pass the limit."""
        with self._lock:
            if self.limit is not None and self.spent + self.reserved + amount > self.limit:
                return False
            self.reserved += amount
            return True

    def settle(self, reserved: float, spent: float) -> None:
        """A call is done: release its reservation and count what it cost."""
        with self._lock:
            self.reserved = max(0.0, self.reserved - reserved)
            self.spent += spent


@dataclass
class Answers:
    """What ``Answering.finish`` returns.

    Attributes:
        rows: one row per answered (or skipped) probe: the ``KEY`` columns and
            the answer columns (see ``Answering``).
        tally: the run's calls, tokens and spend (a dry run's estimates).
        stopped: why the run stopped early (``reader.max_usd``), or None.
        reader: the reader's name; judge: the judge's name.
        max_in_flight: the most probes whose calls ran at once.
        seconds: wall time from the first probe to the last answer.
        dry_run: the tally is an estimate and nothing was sent.
    """

    rows: pd.DataFrame
    tally: Tally
    stopped: str | None
    reader: str
    judge: str
    max_in_flight: int = 0
    seconds: float = 0.0
    dry_run: bool = False
    limit: float | None = None

    def merge(self, probes: pd.DataFrame) -> pd.DataFrame:
        """``probes`` with the answer columns joined (probe order kept)."""
        if self.rows.empty or probes.empty:
            return probes
        return probes.merge(self.rows, on=KEY, how="left", validate="one_to_one")

    def incomplete(self) -> dict[str, Any] | None:
        """The fingerprint's ``incomplete`` entry of a run stopped early, else None."""
        if self.stopped is None:
            return None
        return {
            "reason": self.stopped,
            "spent_usd": round(self.tally.cost_usd, 6),
            "probes_unanswered": self.tally.skipped,
        }


class Answering:
    """The replay's probe hook (see the module docstring).

    Rows it writes per probe: ``answer`` (the reader's text), ``answer_accuracy``
    (the judge's score), ``judge_verdict`` (correct / wrong / partial /
    ungraded), ``judge_text`` (the judge's raw reply, or its rule), ``reader_status``
    (answered: a request was sent; cached; or why it was skipped),
    ``reader_prompt_tokens``, ``reader_completion_tokens``, ``reader_cost_usd``,
    ``reader_finish`` (the endpoint's finish_reason), ``reader_ms`` (time in the
    reader, cache included), ``injection_followed`` (see ``memlab.lab.planted``),
    and for a judge with a model ``judge_cost_usd`` and ``judge_cached``.

    Args:
        reader: the reader.
        judge: the judge.
        settings: concurrency, cost limit, dry run.
        progress: a bar on a terminal (None), or none (False).
    """

    def __init__(
        self,
        reader: Reader,
        judge: Judge,
        settings: AnswerSettings,
        *,
        progress: bool | None = None,
    ) -> None:
        self.reader = reader
        self.judge = judge
        self.settings = settings
        self.meter = CostMeter(settings.max_usd)
        self.tally = Tally()
        self.stopped: str | None = None
        self.error: BaseException | None = None
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(2 * settings.concurrency)
        self._pool: ThreadPoolExecutor | None = None
        self._futures: list[Future[None]] = []
        self._planted: tuple[str, dict[str, Payload]] = ("", {})
        self._running = 0
        self.max_in_flight = 0
        self._started: float | None = None
        self._bar = bar(
            total=0,
            progress=None if progress is None or progress else False,
            desc="answers",
            unit="probe",
            position=1,
            leave=False,
        )

    # -- before the run ----------------------------------------------------------------
    def check(self) -> None:
        """Check the reader's and the judge's endpoints (unless ``preflight`` is off
        or this is a dry run).

        Raises:
            ChatEndpointError: an endpoint is unreachable or refused the key.
            ConfigError: the endpoint does not serve the configured model.
        """
        if self.settings.preflight and not self.settings.dry_run:
            self.reader.check()
            self.judge.check()

    # -- the hook ----------------------------------------------------------------------
    def __call__(
        self,
        transcript: Transcript,
        index: int,
        turn: Turn,
        context: Context,
        row: dict[str, Any],
    ) -> None:
        """Ask about one probe (called by the replay right after its context is built).

        Raises:
            MemlabError: an earlier answer failed (the run stops with its error).
        """
        if self.error is not None:
            raise self.error
        if self._started is None:
            self._started = time.perf_counter()
        if self._planted[0] != transcript.id:
            self._planted = (transcript.id, planted_turns(transcript))
        payloads = planted_in_context(self._planted[1], context)
        key = {"strategy": row["strategy"], "transcript": transcript.id, "probe": turn.id}
        messages = self.reader.messages(turn.text, context.items, turn.time)
        hit = self.reader.lookup(messages)
        q = question_of(transcript, turn, "")
        self.tally.probes += 1
        if self.settings.dry_run:
            self._count(messages, hit, q)
            return
        if self.stopped is not None:
            self._skip(key)
            return
        reader_bound = 0.0 if hit else self._reader_bound(messages)
        bound = reader_bound + self.judge.cost_bound(q, self.reader.max_tokens)
        if not self.meter.reserve(bound):
            self.stopped = f"reader.max_usd={self.settings.max_usd:g} reached"
            self._skip(key)
            return
        self._bar.total += 1
        self._bar.refresh()
        if hit is not None and self.judge.prices is None:
            self._answer(key, messages, hit, q, payloads, bound)  # no request to make
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.settings.concurrency, "memlab-answer")
        self._slots.acquire()
        try:
            future = self._pool.submit(self._answer, key, messages, hit, q, payloads, bound)
        except BaseException:
            self._slots.release()
            raise
        future.add_done_callback(lambda _: self._slots.release())
        self._futures.append(future)

    def stop_requested(self) -> bool:
        """True once the cost limit stopped the asking (the replay ends after the
        current transcript) or an answer failed."""
        return self.stopped is not None or self.error is not None

    # -- one probe ---------------------------------------------------------------------
    def _answer(
        self,
        key: dict[str, Any],
        messages: list[Message],
        hit: Completion | None,
        q: Question,
        payloads: list[Payload],
        bound: float,
    ) -> None:
        spent = 0.0
        with self._lock:
            self._running += 1
            self.max_in_flight = max(self.max_in_flight, self._running)
        try:
            t0 = time.perf_counter()
            completion = hit if hit is not None else self.reader.answer(messages)
            reader_ms = (time.perf_counter() - t0) * 1e3
            verdict = self.judge.grade(replace(q, answer=completion.text))
            spent = self._record(key, completion, reader_ms, verdict, q, payloads)
        except BaseException as exc:
            with self._lock:
                if self.error is None:
                    self.error = _explained(exc, q.id)
        finally:
            self.meter.settle(bound, spent)
            with self._lock:
                self._running -= 1
            self._bar.update(1)

    def _record(
        self,
        key: dict[str, Any],
        completion: Completion,
        reader_ms: float,
        verdict: Verdict,
        q: Question,
        payloads: list[Payload],
    ) -> float:
        """Write the probe's row and count its calls; return what they cost this run."""
        reader_cost = self.reader.prices.of(completion)
        row: dict[str, Any] = {
            **key,
            "answer": completion.text,
            "answer_accuracy": verdict.score,
            "judge_verdict": verdict.label,
            "judge_text": verdict.text,
            "reader_status": "cached" if completion.cached else "answered",
            "reader_prompt_tokens": completion.prompt_tokens,
            "reader_completion_tokens": completion.completion_tokens,
            "reader_cost_usd": reader_cost,
            "reader_finish": completion.finish_reason or "",
            "reader_ms": reader_ms,
            "injection_followed": injection_followed(completion.text, payloads, q.question, q.gold),
        }
        spent = 0.0 if completion.cached else reader_cost
        judged = verdict.completion
        judge_cost = 0.0
        if self.judge.prices is not None:
            judge_cost = self.judge.prices.of(judged)
            row["judge_cost_usd"] = judge_cost if judged is not None else math.nan
            row["judge_cached"] = bool(judged.cached) if judged is not None else math.nan
        with self._lock:
            self._rows.append(row)
            t = self.tally
            if completion.cached:
                t.reader_cached += 1
            else:
                t.reader_calls += 1
                t.reader_prompt_tokens += completion.prompt_tokens
                t.reader_completion_tokens += completion.completion_tokens
            if judged is not None:
                if judged.cached:
                    t.judge_cached += 1
                else:
                    t.judge_calls += 1
                    t.judge_prompt_tokens += judged.prompt_tokens
                    t.judge_completion_tokens += judged.completion_tokens
                    spent += judge_cost
                    t.judge_usd += judge_cost
            t.cost_usd += spent
        return spent

    def _skip(self, key: dict[str, Any]) -> None:
        with self._lock:
            self._rows.append({**key, "reader_status": COST_LIMIT})
            self.tally.skipped += 1

    def _reader_bound(self, messages: list[Message]) -> float:
        return self.reader.prices.cost(_prompt_tokens(messages), self.reader.max_tokens)

    def _count(self, messages: list[Message], hit: Completion | None, q: Question) -> None:
        """A dry run's tally of one probe."""
        t = self.tally
        answer_tokens = self.reader.max_tokens
        if hit is None:
            t.reader_calls += 1
            t.reader_prompt_tokens += _prompt_tokens(messages)
            t.reader_completion_tokens += answer_tokens
            t.cost_usd += self._reader_bound(messages)
        else:
            t.reader_cached += 1
            answer_tokens = hit.completion_tokens
        if self.judge.prices is None:
            return
        lookup = getattr(self.judge, "lookup", None)
        if hit is not None and lookup is not None and lookup(replace(q, answer=hit.text)):
            t.judge_cached += 1
            return
        bound = self.judge.cost_bound(q, answer_tokens)
        if bound > 0:
            t.judge_calls += 1
            t.cost_usd += bound
            t.judge_usd += bound

    # -- after the replay --------------------------------------------------------------
    def finish(self) -> Answers:
        """Wait for the last answers and return them.

        Raises:
            MemlabError: an answer failed (the first failure, naming its probe).
        """
        try:
            for future in self._futures:
                future.result()
        finally:
            self.close()
        if self.error is not None:
            raise self.error
        rows = pd.DataFrame(self._rows)
        if not rows.empty:
            rows = rows.drop_duplicates(KEY, keep="last")
        seconds = time.perf_counter() - self._started if self._started is not None else 0.0
        return Answers(
            rows=rows,
            tally=self.tally,
            stopped=self.stopped,
            reader=self.reader.name,
            judge=self.judge.name,
            max_in_flight=self.max_in_flight,
            seconds=seconds,
            dry_run=self.settings.dry_run,
            limit=self.settings.max_usd,
        )

    def close(self, wait: bool = True) -> None:
        """Stop the pool (queued probes are dropped) and close the progress bar.
        ``wait=False`` (an interrupt, a failure) does not wait for the requests in
        flight: closing the reader's and judge's clients next ends them. Idempotent;
        the reader and judge are closed by whoever built them."""
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)
            self._pool = None
        self._bar.close()


def grade_all(
    judge: Judge,
    questions: Sequence[Question],
    *,
    concurrency: int = AnswerSettings.concurrency,
    max_usd: float | None = None,
    progress: bool | None = None,
) -> list[Verdict | None]:
    """Grade many answers without a run (e.g. a judge prompt's calibration on
    known-right and known-wrong answers), with the run's rules: at most
    ``concurrency`` judge calls in flight, a progress bar on a terminal, and a cost
    cap (each call's upper estimate is reserved first; once the next would pass
    ``max_usd``, the remaining questions are not graded).

    Returns:
        One verdict per question, in order; None for a question left ungraded by
        the cap.

    Raises:
        MemlabError: a judge call failed for good (naming the question).
    """
    settings = AnswerSettings(concurrency=concurrency, max_usd=max_usd)
    meter = CostMeter(settings.max_usd)
    out: list[Verdict | None] = [None] * len(questions)

    def grade(i: int, bound: float) -> None:
        spent = 0.0
        try:
            verdict = judge.grade(questions[i])
            done = verdict.completion
            if judge.prices is not None and done is not None and not done.cached:
                spent = judge.prices.of(done)
            out[i] = verdict
        except BaseException as exc:
            raise _explained(exc, questions[i].id or str(i)) from None
        finally:
            meter.settle(bound, spent)

    with (
        bar(
            total=len(questions), progress=progress, desc="judge", unit="answer", leave=False
        ) as shown,
        ThreadPoolExecutor(settings.concurrency, "memlab-judge") as pool,
    ):
        futures: list[Future[None]] = []
        for i, q in enumerate(questions):
            bound = judge.cost_bound(q, estimate_tokens(q.answer))
            if not meter.reserve(bound):
                break
            futures.append(pool.submit(grade, i, bound))
            futures[-1].add_done_callback(lambda _: shown.update(1))
        try:
            for future in futures:
                future.result()
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return out


def _prompt_tokens(messages: list[Message]) -> int:
    return sum(estimate_tokens(m["content"]) for m in messages)


def _explained(exc: BaseException, probe: str) -> BaseException:
    """A failed answer's error, naming the probe and how to resume."""
    if not isinstance(exc, MemlabError):
        return exc
    err = MemlabError(
        f"while answering probe {probe}: {exc} (the answers received so far are cached: "
        "a rerun resumes without paying for them again)"
    )
    err.exit_code = exc.exit_code
    return err


__all__ = ["KEY", "AnswerSettings", "Answering", "Answers", "CostMeter", "Tally", "grade_all"]
