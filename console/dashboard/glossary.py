"""The staff glossary: every statistical term the dashboard shows, in plain words with the technical detail.

Pages link a term with ``{% term "key" %}`` (``console/templatetags/dashboard_terms.py``): the plain sentence
is the link's hover title and the link opens the glossary page at the entry. Parameter names of the rating
model (``beta``, ``sigma_human``, …) and model kinds (``calibrated_task``, …) get readable labels here; the
technical name stays in the entry, one click away.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    key: str
    term: str
    plain: str
    technical: str = ""


_TERMS = (
    Term("collabskill", "CollabSkill score (μ − kσ)",
         "A cautious skill score: the best estimate minus k times its uncertainty, so a skill measured on few "
         "tasks is not ranked high by luck. Rankings use it.",
         "μ − kσ with k set per study (paper: k = 3, shown as μ − 3.0σ). Paper §4."),
    Term("mu", "Estimated skill (μ)",
         "The model's best estimate of a skill, in points of the 0–100 score. For agents it is the score level "
         "they reach with a typical participant; for participants it is relative to the typical participant.",
         "Posterior mean μ = Λ⁻¹η of the rating model y = s_agent + s_human + ε."),
    Term("sigma", "Uncertainty (σ)",
         "How far the true skill may plausibly be from the estimate; it shrinks as more scores come in.",
         "Posterior standard deviation σ_i = sqrt((Λ⁻¹)_ii)."),
    Term("n", "n (scored episodes)", "How many scored episodes the estimate rests on."),
    Term("posterior", "Posterior (and its version)",
         "The model's current estimates of every skill, given all scores so far. Its version number goes up "
         "each time new scores are added and the estimates are recomputed.",
         "Bayesian posterior of the rating model; each refresh stores a numbered snapshot."),
    Term("live_update", "Live update (and refit)",
         "Between full recomputations the agents' estimates are updated within about a second of each new "
         "score; participants' scores and the noise and spread settings stay those of the last full "
         "recomputation (a refit), which runs on a schedule or when the data no longer fit those settings.",
         "Exact posterior of the agents at the refit's variance components (information-form update of the "
         "changed participants' terms); the REML score test decides when the components are re-estimated."),
    Term("observation", "Observation",
         "One scored episode as the rating model sees it: an agent, a participant and a score."),
    Term("episode", "Episode",
         "One worker doing one task with one agent. A worker's session is several episodes (the study's tasks "
         "per session)."),
    Term("relative_skill", "Why most participant scores are negative",
         "Participant skills are measured relative to the typical participant of the study (0 = typical). The "
         "cautious score then subtracts k uncertainties (about 3 × 3 points here), so most participants land "
         "below zero. A negative score does not mean poor work; compare participants with each other.",
         "Participants are zero-mean random effects in the calibrated models (the agents carry the level)."),
    Term("rating_model", "Rating model",
         "How scores are turned into skills. Paper model: the published fixed settings. Calibrated: the noise "
         "and the spread of participants are learnt from the data. Calibrated + task difficulty: also allows "
         "for tasks that are harder than others. Judge-aware: also removes each grader's leniency.",
         "Model kinds paper, calibrated, calibrated_task, judge_aware; variance components by REML."),
    Term("beta", "Score noise (β)",
         "How much one score varies around what the skills predict, in points. Large noise needs more "
         "episodes to separate agents.", "beta: standard deviation of ε."),
    Term("sigma_human", "Spread of participant skill",
         "How much participants differ from each other, in points.", "sigma_human: SD of the participant effects."),
    Term("sigma_task", "Spread of task difficulty",
         "How much tasks differ in difficulty, in points (only in the model with task difficulty).",
         "sigma_task: SD of the task effects."),
    Term("sigma_agent", "Spread of agent skill",
         "How much agents differ from each other, in points (when agents are modelled as random).",
         "sigma_agent: SD of the agent effects."),
    Term("sigma_episode", "Spread of episode quality",
         "How much episodes differ in the quality every grader sees in them, in points (judge-aware model).",
         "sigma_episode: SD of q_e, the episode effect shared by its graders."),
    Term("level", "Global level", "The average score level the agents' estimates are measured from.",
         "Intercept of the calibrated model."),
    Term("residual_sd", "Residual spread",
         "How far scores actually fall from the model's predictions, in points. Close to the assumed noise "
         "(ratio near 1) means the model's uncertainty is honest.", "Residual SD; the ratio is residual SD / β."),
    Term("reml", "Restricted log-likelihood",
         "A fit score used only to compare models on the same data: higher fits better.",
         "REML log-likelihood of the variance components."),
    Term("aic", "AIC",
         "A fit score that also penalises extra parameters: lower is better; a difference under about 2 means "
         "the models fit equally well.", "Akaike information criterion, −2 log L + 2k."),
    Term("lr_statistic", "Likelihood-ratio test",
         "Tests whether adding task difficulty improves the fit more than chance would; a small p says it does.",
         "LR statistic = 2 (log L₁ − log L₀), p from a 50:50 mixture of χ²₀ and χ²₁ (a variance on its boundary)."),
    Term("p_value", "p-value",
         "How surprising the result would be if there were no real effect: below 0.05 is usually called "
         "significant. With many tests, use the Holm-adjusted p."),
    Term("holm", "Holm adjustment",
         "Raises p-values to allow for many tests in one table, so a table of 10 items does not produce a "
         "'significant' result by chance.", "Holm–Bonferroni step-down correction, each table one family."),
    Term("bootstrap", "Bootstrap",
         "The data are resampled many times and the ranking recomputed each time, to see how often the order "
         "changes.", "Resampling observations (or whole participants) with replacement; paper: 10 000 rounds."),
    Term("kendall_tau", "Kendall τ",
         "Agreement between two rankings: 1 = the same order, 0 = unrelated. The mean over the bootstrap says "
         "how stable the agent ranking is.", "Mean Kendall τ between each bootstrap ranking and the full-data one."),
    Term("p_rank1", "P(rank = 1)", "The share of bootstrap resamples in which the agent came first."),
    Term("rank_interval", "95 % rank interval",
         "The range of ranks the agent took in 95 % of bootstrap resamples."),
    Term("leave_one_out", "Leave-one-out mean rank",
         "The agent's average rank when one participant (or one task) at a time is left out: a rank that moves a "
         "lot depends on a few people or tasks."),
    Term("pairwise", "P(A > B)",
         "The probability that agent A's skill is higher than agent B's, from the current estimates and their "
         "uncertainty.", "Φ((μ_A − μ_B) / sqrt(Σ_AA + Σ_BB − 2Σ_AB)) from the exact joint posterior."),
    Term("coverage", "Held-out coverage",
         "Part of the scores is hidden, predicted from the rest, and we count how often the real score falls "
         "inside the 95 % prediction interval. Near 0.95 means the stated uncertainty is honest; well below "
         "means intervals are too narrow.", "K-fold predictive coverage of 95 % intervals; z = standardized error."),
    Term("qq_plot", "Residual QQ plot",
         "Each dot is one score's prediction error against what pure noise would give: dots on the dashed line "
         "mean the noise assumption fits.", "Standardized residuals against normal quantiles."),
    Term("connectivity", "Connectivity",
         "Agents can only be compared through participants who worked with both; groups that share nobody are "
         "compared only through the prior."),
    Term("spearman", "Spearman ρ",
         "A correlation of ranks from −1 to 1: positive means higher answers go with higher skill.",
         "Spearman rank correlation with a Fisher-z 95 % interval."),
    Term("wilcoxon", "Wilcoxon signed-rank test (W)",
         "Tests whether the same people answered differently after the tasks than before.",
         "Two-sided Wilcoxon signed-rank test on post − pre."),
    Term("mann_whitney", "Mann-Whitney U",
         "Tests whether the change differs between the lower and upper half of participants by skill."),
    Term("rank_biserial", "Rank-biserial r",
         "Effect size from −1 to 1 for the rank tests: how lopsided the differences are."),
    Term("point_biserial", "Point-biserial r",
         "Correlation between a yes/no behaviour and the score, from −1 to 1."),
    Term("se", "SE (standard error)", "The uncertainty of a mean or difference."),
    Term("delta", "Δ (change)", "Post-survey mean minus pre-survey mean."),
    Term("leniency", "Leniency",
         "How many points more (or fewer) a grader gives than the reference graders to the same work."),
    Term("self_preference", "Self-preference",
         "How many points more a judge gives to agents of its own model family than other graders do."),
    Term("judge_aware", "Judge-aware model",
         "A rating model that treats each grade as one grader's view and removes each grader's leniency and "
         "self-preference before comparing agents.",
         "y_eg = a_A + h_H + q_e + b_g + c_g,F(A) + ε (judge_aware)."),
    Term("p1", "p₁ (first-attempt completion)",
         "The share of episodes whose first attempt completes the task: every critical and important rubric "
         "criterion passes and no pitfall is hit.", "UpBench p₁ = A / N."),
    Term("r1", "R̄₁ (mean first-attempt rubric score)",
         "The average rubric score of the first attempts: criteria passed over all the rubric's criteria "
         "(0 to 1), a skipped criterion counting as not passed. The grade's own score, which the ratings use, "
         "leaves skipped criteria out instead.",
         "UpBench R̄₁ = mean of R_j,1 = #passed / #total (Table 2)."),
    Term("pass_at_k", "pairs@k (pass@k across worker–agent pairs)",
         "The chance that at least one of k different worker–agent pairs completes a task on their first "
         "attempt, averaged over tasks that at least k pairs attempted. It is not UpBench's pass@k, which counts "
         "k retries of one job by one agent: here the k attempts are different workers' sessions with the "
         "agent. The retry view is the re-attempt columns (M, B, p_overall).",
         "Unbiased pass@k estimator (UpBench Eq. 2-3) applied to each task's first attempts by different pairs."),
    Term("futures", "Simulated futures",
         "Possible continuations of the study drawn from the current estimates; the spread of their outcomes "
         "is the uncertainty of the estimate of episodes still needed."),
    Term("design_mode", "Pairing design",
         "How each episode's agent is chosen: uniform (at random, no repeat for a worker), balanced (the agent "
         "with the fewest episodes), adaptive (favouring agents whose order is still uncertain)."),
    Term("repeat_limit", "Repeat limit",
         "How many of a worker's tasks may be done with the same agent. At 1, a worker who does at least as many "
         "tasks as there are agents meets every agent, so all designs assign the same pairs."),
)

GLOSSARY: dict[str, Term] = {term.key: term for term in _TERMS}

# Readable labels for the rating model's parameter names; the technical name stays in the glossary.
PARAMETER_TERMS = {name: name for name in ("beta", "sigma_human", "sigma_task", "sigma_agent", "sigma_episode",
                                           "level")}


def term_get(key: str) -> Term:
    """Return the glossary entry, failing loudly so a page can never link to a missing term."""
    try:
        return GLOSSARY[key]
    except KeyError:
        raise KeyError(f"no glossary entry {key!r}") from None


def parameter_label(name: str) -> tuple[str, str]:
    """Return (readable label, glossary key) for a rating-model parameter name; unknown names stay as they are."""
    key = PARAMETER_TERMS.get(name)
    if key is None:
        return name, ""
    return GLOSSARY[key].term, key
