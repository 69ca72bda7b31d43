"""The demo study's agents and task catalogue (our own wording; agents and versions as in the paper §3.1)."""

from __future__ import annotations

AGENTS = [
    {
        "name": "Claude Cowork", "slug": "claude-cowork",
        "tutorial_url": "https://support.anthropic.com/",
        "product": "Anthropic Claude desktop (Cowork)",
        "model_version": "claude-sonnet-4.6", "interface": "desktop", "log_mode": "upload",
        "log_format": "screenshot",
        "setup_guide": (
            "## Setting up Claude Cowork\n\n1. Install the Claude desktop app for your operating system.\n"
            "2. Sign in with the study account details from your invitation e-mail.\n"
            "3. Open **Cowork**, choose a working folder for this task, and copy the reference files into it.\n"
            "4. Ask it to list the folder's files. When it answers, it is ready.\n"
        ),
        "log_instructions": "Take screenshots of the whole conversation, top to bottom, and upload them as the log.",
    },
    {
        "name": "Claude Code", "slug": "claude-code",
        "tutorial_url": "https://docs.anthropic.com/en/docs/claude-code/overview",
        "product": "Anthropic Claude Code (terminal)",
        "model_version": "claude-sonnet-4.6", "interface": "terminal", "log_mode": "upload",
        "log_format": "claude_code",
        "setup_guide": (
            "## Setting up Claude Code\n\n1. Install Node.js 18 or newer.\n"
            "2. Run `npm install -g @anthropic-ai/claude-code` in a terminal.\n"
            "3. Create a folder for this task, put the reference files in it, `cd` into it and run `claude`.\n"
            "4. Log in when asked. Type `/status` — if it answers, it is ready.\n"
        ),
        "log_instructions": "Upload Claude Code's own session file (see below), not a copy of the screen.",
    },
    {
        "name": "Codex", "slug": "codex",
        "tutorial_url": "https://github.com/openai/codex#readme",
        "product": "OpenAI Codex CLI (terminal)",
        "model_version": "gpt-5.2-codex-medium", "interface": "terminal", "log_mode": "upload",
        "log_format": "codex",
        "setup_guide": (
            "## Setting up Codex\n\n1. Install Node.js 18 or newer.\n2. Run `npm install -g @openai/codex`.\n"
            "3. Create a folder for this task with the reference files, `cd` into it and run `codex`.\n"
            "4. Sign in when asked, then ask it to list the files in the folder.\n"
        ),
        "log_instructions": "Upload Codex's own session file (see below), not a copy of the screen.",
    },
    {
        "name": "Manus", "slug": "manus",
        "tutorial_url": "https://manus.im/",
        "product": "Manus (browser)",
        "model_version": "manus-1.6-lite", "interface": "browser", "log_mode": "share_url",
        "share_url_hosts": ["manus.im"],
        "setup_guide": (
            "## Setting up Manus\n\n1. Open Manus in your browser and sign in with the study account.\n"
            "2. Start a new task and attach the reference files.\n"
            "3. When it acknowledges the files, it is ready.\n"
        ),
        "log_instructions": "Use **Share** in Manus and paste the public share link into the log field.",
    },
    {
        "name": "Gemini CLI", "slug": "gemini-cli",
        "tutorial_url": "https://github.com/google-gemini/gemini-cli#readme",
        "product": "Google Gemini CLI (terminal)",
        "model_version": "gemini-3-auto", "interface": "terminal", "log_mode": "upload",
        "log_format": "gemini",
        "setup_guide": (
            "## Setting up Gemini CLI\n\n1. Install Node.js 20 or newer.\n2. Run `npm install -g @google/gemini-cli`.\n"
            "3. Create a folder with the reference files, `cd` into it and run `gemini`.\n"
            "4. Sign in with your Google account, then ask it to list the files.\n"
        ),
        "log_instructions": "Save the chat in Gemini CLI and upload the saved file (see below).",
    },
]

# (sector SOC major group, occupation SOC code, title, prompt, deliverables, file kinds, hidden notes)
TASKS = [
    ("13", "13-2011.00", "Reconcile a quarter's vendor payments",
     "The attached ledger lists vendor payments for Q3. Reconcile them against the bank statement extract, flag every "
     "mismatch, and produce a workbook with a reconciliation sheet and a one-page memo summarising the exceptions.",
     ["reconciliation.xlsx", "exceptions-memo.docx"], ["xlsx", "csv"],
     "Three mismatches are planted: a duplicate payment (INV-1042), a transposed amount (1,274 vs 1,247) and a "
     "missing bank entry for INV-1077."),
    ("13", "13-2051.00", "Build a discounted cash-flow model",
     "Using the five-year projections in the workbook, build a DCF model with a WACC of 9% and terminal growth of "
     "2%. Report enterprise value and a sensitivity table for WACC ±1% and growth ±0.5%.",
     ["dcf-model.xlsx"], ["xlsx", "pdf"],
     "Enterprise value should come out near 48.6 million; sensitivity grid must be 3×3."),
    ("13", "13-1111.00", "Process-improvement brief for a warehouse",
     "Read the operations report and interview notes, identify the three largest sources of picking delays and "
     "write a two-page improvement brief with quantified expected savings.",
     ["improvement-brief.docx"], ["docx", "pdf"],
     "Top causes: batch size, slotting of fast movers, and scanner downtime."),
    ("11", "11-2021.00", "Quarterly marketing budget reallocation",
     "Given channel spend and conversions, propose a reallocation of next quarter's budget that keeps the total "
     "fixed, with a chart and a short rationale per channel.",
     ["budget-plan.xlsx", "rationale.docx"], ["xlsx", "csv"],
     "Paid social has the lowest cost per conversion; print is dominated and should be cut."),
    ("11", "11-3121.00", "Draft a hybrid-work policy",
     "Draft a hybrid-work policy for a 400-person company using the survey results attached. Cover eligibility, "
     "core hours, equipment, and review cadence.",
     ["hybrid-policy.docx"], ["csv", "pdf"],
     "Survey shows 68% prefer 2–3 office days; policy should reflect that."),
    ("15", "15-2041.00", "Analyse an A/B test",
     "Analyse the A/B test export: compute conversion rates, a two-sided test of the difference, a 95% confidence "
     "interval, and write a short recommendation.",
     ["ab-analysis.xlsx", "recommendation.md"], ["csv", "docx"],
     "Variant B lifts conversion from 4.1% to 4.6%; p ≈ 0.03."),
    ("15", "15-2051.00", "Churn drivers from customer data",
     "Identify the main drivers of churn in the attached customer table and present a ranked list with evidence "
     "and a small slide deck for the leadership meeting.",
     ["churn-drivers.pptx", "analysis.xlsx"], ["csv", "xlsx"],
     "Tenure under 6 months and support tickets > 3 are the strongest predictors."),
    ("15", "15-1211.00", "Requirements for a ticketing-system migration",
     "Turn the stakeholder notes into a requirements document for migrating the help-desk ticketing system, with "
     "prioritised user stories and acceptance criteria.",
     ["requirements.docx"], ["docx", "pdf"],
     "Must include SSO, data retention of 7 years, and an SLA report."),
    ("17", "17-2051.00", "Stormwater culvert sizing check",
     "Check whether the culvert design in the attached calculation sheet handles the 25-year storm. Correct any "
     "errors and summarise the result in a short technical memo.",
     ["culvert-check.xlsx", "memo.pdf"], ["xlsx", "pdf"],
     "The runoff coefficient is wrong (0.35 should be 0.55); the culvert is undersized."),
    ("17", "17-2141.00", "Bill of materials cost roll-up",
     "Roll up the cost of the assembly from the BOM and supplier price lists, flag parts with a single supplier, "
     "and propose two cost reductions.",
     ["bom-costing.xlsx"], ["xlsx", "csv"],
     "Total roll-up is 1,842.50 per unit; two parts are single-sourced."),
    ("23", "23-1011.00", "Review a supplier agreement",
     "Review the supplier agreement and list the clauses that expose the buyer to risk, with suggested redlines "
     "and a one-paragraph summary for the client.",
     ["contract-review.docx"], ["docx", "pdf"],
     "Unlimited liability clause 9.2 and auto-renewal 14.1 are the key risks."),
    ("23", "23-2011.00", "Prepare a case chronology",
     "From the attached correspondence and notes, prepare a dated chronology of events with source references for "
     "each entry.",
     ["chronology.xlsx"], ["docx", "csv"],
     "The chronology has 14 events; the termination notice date is 2024-03-18."),
    ("25", "25-2021.00", "Fractions unit plan for grade 4",
     "Write a two-week unit plan on equivalent fractions for a grade 4 class, including daily objectives, "
     "activities, differentiation and an end-of-unit assessment with answer key.",
     ["unit-plan.docx", "assessment.pdf"], ["docx", "pdf"],
     "Assessment must align with CCSS 4.NF.A.1."),
    ("25", "25-1011.00", "Business case study with teaching notes",
     "Turn the attached company data into a 3-page business case for an MBA class, with discussion questions "
     "and teaching notes.",
     ["case-study.docx"], ["xlsx", "pdf"],
     "The case centres on the 2022 inventory write-down."),
    ("27", "27-3031.00", "Crisis press statement and Q&A",
     "Draft a press statement and an internal Q&A after the product recall described in the incident report.",
     ["press-statement.docx", "qa.docx"], ["pdf", "docx"],
     "Statement must not admit liability and must give the recall hotline number."),
    ("27", "27-3041.00", "Edit a technical white paper",
     "Copy-edit the attached white paper for clarity and consistency, track key changes in a change log, and "
     "deliver a clean version.",
     ["white-paper-edited.docx", "change-log.xlsx"], ["docx", "csv"],
     "Inconsistent units (kWh vs MWh) in sections 2 and 4."),
    ("29", "29-1141.00", "Discharge teaching sheet for heart failure",
     "Create a patient-friendly discharge teaching sheet for heart-failure patients covering medications, daily "
     "weights, diet and warning signs, at a 6th-grade reading level.",
     ["discharge-sheet.pdf"], ["pdf", "docx"],
     "Must instruct to call if weight rises 2–3 lb in a day or 5 lb in a week."),
    ("29", "29-1051.00", "Medication interaction review",
     "Review the medication list in the spreadsheet for clinically important interactions and produce a table "
     "with severity and recommended action.",
     ["interaction-review.xlsx"], ["xlsx", "csv"],
     "Warfarin + amiodarone and simvastatin + clarithromycin are the major interactions."),
    ("41", "41-3091.00", "Territory sales plan",
     "Build a territory plan from the account list: segment accounts, set quarterly targets, and outline the "
     "visit cadence.",
     ["territory-plan.xlsx", "plan-summary.docx"], ["csv", "xlsx"],
     "Top 20% of accounts generate 71% of revenue."),
    ("41", "41-4012.00", "Competitive pricing proposal",
     "Prepare a pricing proposal for a wholesale customer using the cost sheet and competitor prices, with a "
     "margin analysis and a cover letter.",
     ["pricing-proposal.xlsx", "cover-letter.docx"], ["xlsx", "pdf"],
     "Minimum acceptable margin is 18%."),
    ("43", "43-3031.00", "Month-end accruals schedule",
     "Prepare the month-end accruals schedule from the open purchase orders and receipts, with journal entries.",
     ["accruals.xlsx"], ["xlsx", "csv"],
     "Accruals total 23,480.00 across 9 POs."),
    ("43", "43-6014.00", "Board meeting logistics pack",
     "Prepare the logistics pack for the quarterly board meeting: agenda, travel summary, and a room set-up "
     "checklist, using the attached emails and calendar export.",
     ["board-pack.docx", "travel.xlsx"], ["csv", "docx"],
     "Two directors arrive the night before; one needs a vegetarian meal."),
    # Appended later (the demo derives task ids from list positions, so new tasks only ever go at the end):
    # sectors that had no task, and a third task where a sector had two.
    ("19", "19-3011.00", "Regional labour-market outlook",
     "Using the attached employment and wage series, write a short outlook for the regional labour market over the "
     "next two years, with one chart per indicator and the assumptions stated.",
     ["labour-outlook.docx", "indicators.xlsx"], ["csv", "xlsx"],
     "Unemployment falls from 5.1% to 4.6%; wage growth slows to 3.2% in the second year."),
    ("19", "19-3011.00", "Price-elasticity estimate for a transit fare change",
     "Estimate the price elasticity of ridership from the fare-change data provided and recommend whether the "
     "proposed 10% fare rise raises revenue.",
     ["elasticity.xlsx", "recommendation.docx"], ["csv", "pdf"],
     "Elasticity is about -0.35, so the fare rise increases revenue by roughly 6%."),
    ("51", "51-1011.00", "Shift schedule for a packaging line",
     "Build a four-week shift schedule for the packaging line from the staff roster and demand forecast, "
     "respecting rest rules, and summarise overtime per person.",
     ["shift-schedule.xlsx"], ["csv", "xlsx"],
     "Week 3 demand needs a weekend shift; nobody may exceed 48 hours in a week."),
    ("51", "51-1011.00", "Root-cause report for a scrap-rate spike",
     "Investigate last month's scrap-rate spike from the production log and write a root-cause report with a "
     "corrective-action plan.",
     ["root-cause-report.docx"], ["csv", "pdf"],
     "The spike follows the die change on line 2 on the 14th; operator training is the corrective action."),
    ("15", "15-1252.00", "Code review of a data-import script",
     "Review the attached data-import script description and sample data, list the defects with their impact, and "
     "write a corrected specification of the import rules.",
     ["review.md", "import-spec.docx"], ["csv", "docx"],
     "Dates are parsed month-first; duplicate customer ids are silently overwritten."),
    ("13", "13-1161.00", "Market sizing for a meal-kit launch",
     "Size the addressable market for a meal-kit service in the three cities in the data, with top-down and "
     "bottom-up estimates and a short slide summary.",
     ["market-sizing.xlsx", "summary.pptx"], ["csv", "xlsx"],
     "Bottom-up estimate should land within 20% of the top-down figure of about 41 million."),
]

# Where a worker's own sector runs out, the demo study offers tasks from related sectors, in this order
# (keys and values are SOC major groups). Every sector in the shipped O*NET fixture reaches at least five
# tasks this way, so every occupation the picker offers can do a full session.
SECTOR_FALLBACKS = {
    "11": ["13", "43", "41"],
    "13": ["11", "43", "19"],
    "15": ["13", "17", "19"],
    "17": ["15", "51"],
    "19": ["13", "15"],
    "23": ["43", "13"],
    "25": ["27", "13"],
    "27": ["25", "41"],
    "29": ["25", "43"],
    "41": ["11", "27"],
    "43": ["13", "11"],
    "51": ["17", "11", "43"],
}
