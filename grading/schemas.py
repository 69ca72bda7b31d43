"""Shapes of what LLMs must return (rubric, judge verdict, log coding) and the domain checks pydantic cannot express.

Pure pydantic: no Django import, so prompts, services, tests and benches share one definition. Domain
checks return lists of sentences rather than raising, because `llm.complete_json` feeds every problem back
to the model at once for a repair round.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

# ------------------------------------------------------------------------------------------- rubric

#: The four fixed categories (paper §3.2, App. C): code (= Criterion.Category value), name, points.
RUBRIC_CATEGORIES: tuple[tuple[str, str, float], ...] = (
    ("correctness", "Correctness & Accuracy", 40.0),
    ("completeness", "Deliverable Completeness", 20.0),
    ("requirements", "Task Requirements", 25.0),
    ("technical", "Technical Quality", 15.0),
)
CATEGORY_POINTS: dict[str, float] = {code: points for code, _name, points in RUBRIC_CATEGORIES}
CATEGORY_NAMES: dict[str, str] = {code: name for code, name, _points in RUBRIC_CATEGORIES}
RUBRIC_TOTAL = 100.0
POINT_TOLERANCE = 0.01
CRITERION_LABELS = ("critical", "important", "optional", "pitfall")


def _normalise(name: str) -> str:
    return re.sub(r"[^a-z]+", " ", name.lower().replace("&", " and ")).strip()


_CATEGORY_BY_NAME = {_normalise(name): code for code, name, _points in RUBRIC_CATEGORIES}
_CATEGORY_BY_NAME.update({code: code for code in CATEGORY_POINTS})


def category_code(name: str) -> str | None:
    """Map a category name as a model wrote it ("Correctness and Accuracy") to its code, or None."""
    return _CATEGORY_BY_NAME.get(_normalise(name))


class _Lenient(BaseModel):
    # Models often add harmless extra keys; ignoring them avoids pointless repair rounds.
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class RubricCriterionOut(_Lenient):
    description: str = Field(min_length=1, description="What is checked, specific to this task.")
    points: float = Field(gt=0, description="Points this criterion is worth.")
    expected_value: str = Field("", description="The exact value or state a correct deliverable shows.")
    evaluation_method: str = Field(min_length=1, description="How a grader verifies it, step by step.")
    label: Literal["critical", "important", "optional", "pitfall"] = Field(
        "important", description="critical: must hold for the work to be usable; pitfall: a common mistake "
                                 "whose points are earned only when it is avoided.")


class RubricCategoryOut(_Lenient):
    name: str = Field(description="One of the four fixed category names.")
    max_points: float
    criteria: list[RubricCriterionOut] = Field(min_length=1)


class ExpectedValueOut(_Lenient):
    item: str = Field(min_length=1)
    value: str = Field(min_length=1)


class RubricOut(_Lenient):
    """A generated rubric: exactly four categories with fixed points, 100 in total."""

    total_points: float
    categories: list[RubricCategoryOut]
    expected_specific_values: list[ExpectedValueOut] = Field(default_factory=list)
    critical_requirements: list[str] = Field(default_factory=list)
    evaluation_notes: str = ""
    reference_files_analyzed: list[str] = Field(default_factory=list)


def category_point_problems(points_by_category: Mapping[str, Sequence[float]]) -> list[str]:
    """Check criterion points per category code against the fixed totals; return readable problems."""
    problems = []
    for code, name, required in RUBRIC_CATEGORIES:
        points = points_by_category.get(code, ())
        if not points:
            problems.append(f'category "{name}" has no criteria; it needs criteria worth {required:g} points')
            continue
        total = math.fsum(points)
        if abs(total - required) > POINT_TOLERANCE:
            problems.append(f'the criteria of "{name}" add up to {total:g} points, but they must add up to '
                            f"exactly {required:g}")
    unknown = sorted(set(points_by_category) - set(CATEGORY_POINTS))
    if unknown:
        problems.append(f"unknown categories {', '.join(unknown)}; use only the four fixed categories")
    grand = math.fsum(p for pts in points_by_category.values() for p in pts)
    if not problems and abs(grand - RUBRIC_TOTAL) > POINT_TOLERANCE:
        problems.append(f"all criteria add up to {grand:g} points instead of {RUBRIC_TOTAL:g}")
    return problems


def rubric_problems(rubric: RubricOut) -> list[str]:
    """Return every way a generated rubric breaks the fixed structure (empty when it is usable)."""
    problems = []
    if abs(rubric.total_points - RUBRIC_TOTAL) > POINT_TOLERANCE:
        problems.append(f"total_points is {rubric.total_points:g}; it must be {RUBRIC_TOTAL:g}")
    names = [c.name for c in rubric.categories]
    if len(rubric.categories) != len(RUBRIC_CATEGORIES):
        problems.append(f"there are {len(rubric.categories)} categories ({', '.join(map(repr, names))}); there "
                        "must be exactly four: " + ", ".join(f'"{n}"' for _c, n, _p in RUBRIC_CATEGORIES))
    seen: dict[str, list[float]] = {}
    for category in rubric.categories:
        code = category_code(category.name)
        if code is None:
            problems.append(f'"{category.name}" is not one of the four categories: '
                            + ", ".join(f'"{n}"' for _c, n, _p in RUBRIC_CATEGORIES))
            continue
        if code in seen:
            problems.append(f'category "{CATEGORY_NAMES[code]}" appears more than once')
            continue
        if abs(category.max_points - CATEGORY_POINTS[code]) > POINT_TOLERANCE:
            problems.append(f'"{CATEGORY_NAMES[code]}" has max_points {category.max_points:g}; it must be '
                            f"{CATEGORY_POINTS[code]:g}")
        seen[code] = [c.points for c in category.criteria]
    missing = [CATEGORY_NAMES[c] for c in CATEGORY_POINTS if c not in seen]
    if missing and len(rubric.categories) == len(RUBRIC_CATEGORIES):
        problems.append("missing categories: " + ", ".join(f'"{n}"' for n in missing))
    if not problems:
        problems += category_point_problems(seen)
    return problems


# -------------------------------------------------------------------------------------------- judge


class JudgeCriterionOut(_Lenient):
    key: str = Field(min_length=1, description="The criterion key from the rubric, e.g. C3.")
    earned: float = Field(ge=0, description="Points earned, from 0 up to the criterion's points.")
    reason: str = Field(min_length=1, description="What was found versus what was expected.")


class JudgeOut(_Lenient):
    """A judge's verdict: earned points per criterion. Category and total sums are ours to compute."""

    criteria: list[JudgeCriterionOut]
    summary: str = Field("", description="Two to four sentences on the submission overall.")


@dataclass(frozen=True)
class CriterionSpec:
    """What a judge verdict is checked against: one rubric criterion."""

    key: str
    category: str
    points: float


def judge_problems(verdict: JudgeOut, criteria: Iterable[CriterionSpec]) -> list[str]:
    """Reject unknown or repeated keys, missing criteria and earned > max; never clamp silently."""
    by_key = {c.key: c for c in criteria}
    problems = []
    seen: set[str] = set()
    for item in verdict.criteria:
        spec = by_key.get(item.key)
        if spec is None:
            problems.append(f'criterion key "{item.key}" is not in the rubric; use only: {", ".join(by_key)}')
            continue
        if item.key in seen:
            problems.append(f'criterion "{item.key}" is scored more than once')
            continue
        seen.add(item.key)
        if not math.isfinite(item.earned):
            problems.append(f'criterion "{item.key}": earned must be a finite number')
        elif item.earned > spec.points + 1e-9:
            problems.append(f'criterion "{item.key}": earned {item.earned:g} exceeds its maximum of {spec.points:g}')
    missing = [key for key in by_key if key not in seen]
    if missing:
        problems.append("no score for criteria: " + ", ".join(missing) + "; score every criterion")
    return problems


@dataclass(frozen=True)
class JudgeTotals:
    category_totals: dict[str, float]
    total: float


def judge_totals(verdict: JudgeOut, criteria: Iterable[CriterionSpec]) -> JudgeTotals:
    """Recompute category and overall sums from per-criterion points (whatever sums the judge claimed)."""
    by_key = {c.key: c for c in criteria}
    sums: dict[str, list[float]] = {code: [] for code in CATEGORY_POINTS}
    for item in verdict.criteria:
        sums.setdefault(by_key[item.key].category, []).append(item.earned)
    category_totals = {code: round(math.fsum(values), 6) for code, values in sums.items()}
    return JudgeTotals(category_totals=category_totals, total=round(math.fsum(category_totals.values()), 6))


# ------------------------------------------------------------------------------------------ fluency


@dataclass(frozen=True)
class FluencyBehaviour:
    code: str
    label: str
    definition: str


#: The 11 directly observable behaviours of the AI Fluency Index coded in paper App. H (our own wording); the
#: codes are the paper's keys so codings merge with its data.
FLUENCY_BEHAVIOURS: tuple[FluencyBehaviour, ...] = (
    FluencyBehaviour("iterates_and_refines", "Iterates and refines",
                     "The worker builds on the agent's earlier output (follow-ups, corrections, asking for more) "
                     "instead of taking the first result as final."),
    FluencyBehaviour("clarifies_goal_before_asking", "Clarifies the goal before asking",
                     "The worker explains what they are trying to achieve before, or together with, a request."),
    FluencyBehaviour("provides_examples_of_good", "Shows what good looks like",
                     "The worker gives examples, templates, reference points or explicit success criteria."),
    FluencyBehaviour("specifies_format_and_structure", "Specifies format and structure",
                     "The worker states how the output should be organised: file type, sections, length, layout."),
    FluencyBehaviour("sets_interaction_mode", "Sets the interaction mode",
                     "The worker tells the agent how to behave in the exchange, e.g. ask before acting, be brief, "
                     "critique rather than write."),
    FluencyBehaviour("communication_tone_and_style", "States tone and style preferences",
                     "The worker asks for a register or voice, e.g. formal, plain-spoken, persuasive."),
    FluencyBehaviour("identifies_missing_context", "Supplies missing context",
                     "The worker notices what the agent does not know, adds background or corrects a wrong "
                     "assumption."),
    FluencyBehaviour("defines_audience", "Defines the audience",
                     "The worker says who the output is for and what that reader needs."),
    FluencyBehaviour("questions_ai_reasoning", "Challenges weak reasoning",
                     "The worker pushes back on, probes or asks the agent to justify a step that seems wrong."),
    FluencyBehaviour("consults_ai_on_approach", "Consults on the approach first",
                     "The worker asks the agent to plan or compare methods before it starts producing the work."),
    FluencyBehaviour("checks_facts_and_claims", "Checks facts and claims",
                     "The worker verifies figures or claims that matter, asks for sources or flags doubtful ones."),
)
FLUENCY_CODES: tuple[str, ...] = tuple(b.code for b in FLUENCY_BEHAVIOURS)


class BehaviourVerdict(_Lenient):
    observed: bool = Field(description="true only when the log shows clear evidence of the behaviour.")
    reason: str = Field(min_length=1, max_length=500, description="One sentence citing the evidence or its absence.")


FluencyOut = create_model(  # one required field per behaviour, so the JSON Schema names each code
    "FluencyOut",
    __base__=_Lenient,
    __doc__="Whether the worker showed each AI-fluency behaviour in the collaboration log.",
    **dict.fromkeys(FLUENCY_CODES, (BehaviourVerdict, ...)),
)


def one_line(text: str, limit: int = 300) -> str:
    """Collapse a model's reason to one line of bounded length for storage and tables."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


# ------------------------------------------------------------------------------ theory of mind / response quality


@dataclass(frozen=True)
class ToMMarker:
    code: str
    label: str
    definition: str
    high: bool = True  # False: a marker of low theory of mind


#: The named markers of the synergy paper's ToM instrument (App. C), in our own wording; codes are stable keys.
TOM_MARKERS: tuple[ToMMarker, ...] = (
    ToMMarker("rapport", "Builds rapport", "Greets the agent or acknowledges its replies (hello, thanks, okay)."),
    ToMMarker("belief_tracking", "Tracks the agent's beliefs",
              "Infers what the agent currently believes about the work and how that changes during the session."),
    ToMMarker("knowledge_gap_detection", "Detects knowledge gaps",
              "Notices what the worker knows that the agent does not (or the reverse) and says so."),
    ToMMarker("perspective_taking", "Takes the agent's perspective",
              "Shows awareness of what the agent needs to know to do the work, and what is irrelevant to it."),
    ToMMarker("goal_inference", "Infers the agent's goals", "Reads from the dialogue what the agent is trying to do."),
    ToMMarker("communication_intent", "States communicative intent",
              "Says why information is shared or what the worker is after (\"help me check this\")."),
    ToMMarker("mental_state_attribution", "Attributes capabilities and limits",
              "Treats the agent as having its own knowledge, capabilities and limitations."),
    ToMMarker("plan_coordination", "Coordinates a plan",
              "Aligns on a strategy or lays out how the two will work together (\"first do X, then I will ...\")."),
    ToMMarker("explanatory_dialogue", "Explains own knowledge and expectations",
              "Gives context about the worker's own expertise, expectations or the level of detail wanted."),
    ToMMarker("confirmation_seeking", "Seeks confirmation",
              "Checks understanding or asks for explanation (\"is this approach right?\")."),
    ToMMarker("positioning", "Coordinates viewpoints", "Acknowledges and reconciles different viewpoints."),
    ToMMarker("builds_on_ideas", "Builds on the agent's ideas",
              "Elaborates on or corrects what the agent understood (\"this is not what I meant\")."),
    ToMMarker("references_back", "Refers back", "Explicitly recalls something the agent said or did earlier."),
    ToMMarker("challenges_ai", "Challenges the agent",
              "Points out mistakes or questions the agent's answer (\"could you be wrong here?\")."),
    ToMMarker("epistemic_markers", "Speaks about knowledge states", "Language such as \"I think you know ...\"."),
    ToMMarker("justification_requests", "Asks for justification", "Asks how or why the agent reached a result."),
    ToMMarker("evaluative_language", "Weighs the agent's credibility",
              "Judges how far the agent's output can be trusted."),
    ToMMarker("metacognitive_references", "Talks about thinking",
              "Discusses the thinking process itself (\"this is a hard one, let's slow down\")."),
    ToMMarker("conversational_adaptation", "Adapts to the agent",
              "Adjusts phrasing or approach in response to how the agent communicates."),
    ToMMarker("irrelevant_information", "Shares irrelevant information",
              "Gives material that does not help the agent, missing the real knowledge asymmetry.", high=False),
    ToMMarker("assumes_shared_context", "Assumes shared context",
              "Refers to things the agent was never shown (\"do the task\" without saying what it is).", high=False),
    ToMMarker("delegates_trivial", "Delegates the trivial",
              "Hands over something trivial or something the worker is plainly better placed to judge.", high=False),
    ToMMarker("treats_ai_as_search", "Treats the agent as a search box",
              "Types keyword fragments as if into a search engine instead of addressing a collaborator.", high=False),
)
TOM_MARKER_CODES: tuple[str, ...] = tuple(m.code for m in TOM_MARKERS)
ToMMarkerCode = Literal[TOM_MARKER_CODES]  # type: ignore[valid-type]
SCORE_MIN, SCORE_MAX = 0, 5


class ToMOut(_Lenient):
    """A judge's theory-of-mind coding of the worker's prompts: reasoning, markers found, a 0-5 score."""

    reason: str = Field(min_length=1, max_length=1500,
                        description="A short paragraph: which signs of theory of mind the prompts show or lack.")
    markers: list[ToMMarkerCode] = Field(
        default_factory=list, description="Codes of every marker (high or low) clearly present in the prompts.")
    score: int = Field(ge=SCORE_MIN, le=SCORE_MAX, description="0: no sign of theory of mind; 5: many clear signs.")


class ResponseQualityOut(_Lenient):
    """A judge's coding of how helpful the agent's responses were to the worker, 0-5."""

    reason: str = Field(min_length=1, max_length=1500,
                        description="A short paragraph on how helpful and sound the agent's responses were.")
    score: int = Field(ge=SCORE_MIN, le=SCORE_MAX, description="0: unhelpful or wrong; 5: very helpful and sound.")


class ToMPairOut(_Lenient):
    """A judge's pairwise ToM comparison: which of two workers' message sets shows more theory of mind."""

    reason: str = Field(min_length=1, max_length=1500, description="A short paragraph comparing the two sets.")
    choice: Literal["A", "B", "tie"] = Field(description="A or B: that set shows more theory of mind; tie: neither.")


# ------------------------------------------------------------------------------ comparison mode


class ComparisonOut(_Lenient):
    """A judge's ranking of the deliverables of one comparison set, in the order they were shown."""

    reason: str = Field(min_length=1, max_length=1500, description="A short paragraph on why this ranking.")
    ranks: list[int] = Field(description="One rank per deliverable in the order shown: 1 is best, equal ranks "
                                         "are ties.")


def comparison_problems(out: ComparisonOut, shown: int) -> list[str]:
    """Why a ranking of ``shown`` deliverables cannot be used (empty when it can): strict, never mended."""
    if len(out.ranks) != shown:
        return [f"give exactly {shown} ranks, one per deliverable in the order shown; {len(out.ranks)} were given"]
    problems = [f"rank {rank} of deliverable {i} is not between 1 and {shown}"
                for i, rank in enumerate(out.ranks, start=1) if not 1 <= rank <= shown]
    if not problems and min(out.ranks) != 1:
        problems.append("the best deliverable must have rank 1")
    return problems
