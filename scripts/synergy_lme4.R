# The synergy model fitted by lme4 (the independent reference of tests/rating/test_synergy_lme4.py and
# bench/synergy.py). Usage: Rscript scripts/synergy_lme4.R episodes.csv full|restricted tight|default
# The CSV has columns y, arm (labels, sorted like the Python fixed columns), human, task, position, solo, team,
# and optionally cov_<name> covariate columns.
# Prints "key value" lines: the REML criterion, fixed effects, variance components and the fit's CPU time.
suppressPackageStartupMessages(library(lme4))
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1], colClasses = c(arm = "character"))
d$arm <- factor(d$arm)
d$human <- factor(d$human)
d$task <- factor(d$task)
d$position <- factor(d$position)
workers <- if (args[2] == "full") "(0 + solo + team | human)" else "(1 | human)"
positions <- if (length(args) < 4 || args[4] == "positions") "position +" else ""
# Columns named cov_* are extra fixed effects (the ToM moderation's covariates, rating/tom_moderation.py).
covs <- grep("^cov_", names(d), value = TRUE)
extra <- if (length(covs)) paste(paste(covs, collapse = " + "), "+") else ""
form <- as.formula(paste("y ~ 0 + arm +", positions, extra, workers, "+ (1 | task) + (0 + team | task)"))
ctrl <- if (args[3] == "tight") {
  lmerControl(optimizer = "nloptwrap", calc.derivs = FALSE, check.conv.singular = "ignore",
              optCtrl = list(ftol_abs = 1e-15, ftol_rel = 1e-15, xtol_abs = 1e-12, xtol_rel = 1e-12,
                             maxeval = 100000))
} else lmerControl()
cpu <- system.time(m <- lmer(form, data = d, REML = TRUE, control = ctrl))
cat("cpu", cpu[["user.self"]] + cpu[["sys.self"]], "\n")
cat("reml", format(REMLcrit(m), digits = 17), "\n")
fe <- fixef(m)
for (n in names(fe)) cat("fixef", n, format(fe[[n]], digits = 17), "\n")
vc <- VarCorr(m)
h <- vc$human
if (args[2] == "full") {
  cat("theta_var", format(h[1, 1], digits = 17), "\n")
  cat("kappa_var", format(h[2, 2], digits = 17), "\n")
  cat("theta_kappa_cov", format(h[1, 2], digits = 17), "\n")
} else cat("theta_var", format(h[1, 1], digits = 17), "\n")
cat("task_solo_var", format(vc$task[1, 1], digits = 17), "\n")
cat("task_agent_extra_var", format(vc$task.1[1, 1], digits = 17), "\n")
cat("residual_var", format(sigma(m)^2, digits = 17), "\n")
