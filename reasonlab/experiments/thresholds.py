"""Every claim's threshold, fixed before the run, with its source: one table, printed at the end of the report.

A direction ("> 0") is the paper's claim taken as stated, with no size attached; a margin is a practical-significance
bound, and its row says why that size.
"""
from __future__ import annotations

from ..stats.findings import Threshold

DIRECTION = "direction only: the paper's claim as stated, any effect past zero"

THRESHOLDS: dict[str, Threshold] = {
    "base.chain_gain": Threshold(0.0, f"{DIRECTION} (chain of thought helps multi-step arithmetic: Wei et al. 2022, "
                                      "arXiv 2201.11903; Nye et al. 2021, arXiv 2112.00114)"),
    "budgets.cap_gain": Threshold(0.0, f"{DIRECTION} (s1, arXiv 2501.19393, Fig. 1: accuracy rises with the thinking "
                                       "budget)"),
    "budgets.headroom": Threshold(0.9, "design bound: the uncapped chain wrong on at least a tenth of the problems, "
                                       "room for Wait to help (s1, arXiv 2501.19393, Fig. 4: Wait adds a few points "
                                       "where the model is far from the ceiling)"),
    "budgets.wait_loss": Threshold(0.0, f"{DIRECTION}, against s1 (arXiv 2501.19393, abstract: suppressing the end of "
                                        "thinking with \"Wait\" lifts s1-32B from 50 % to 57 % on AIME24): a loss of "
                                        "accuracy where the model has no re-checking to extend"),
    "sampling.chain_over_vote": Threshold(0.0, f"{DIRECTION} (self-consistency, Wang et al. 2022, arXiv "
                                               "2203.11171: the vote marginalises over reasoning paths; a direct "
                                               "answer has none)"),
    "sampling.frontier_saving": Threshold(0.0, f"{DIRECTION} (Snell et al. 2024, arXiv 2408.03314, report about 4x "
                                               "fewer tokens; any saving, a log token ratio > 0, counts)"),
    "sampling.acc_gap": Threshold(-0.02, "matched-accuracy bound: the per-k choice's test accuracy within two points "
                                         "of the single strategy's"),
    "star.gain": Threshold(0.0, f"{DIRECTION} (STaR, arXiv 2203.14465, Tables 1-2: STaR above GPT-J fine-tuned to "
                                "answer directly, on CommonsenseQA and GSM8K)"),
    "star.filter_gain": Threshold(0.0, f"{DIRECTION} (STaR section 5 and ReST-EM: answer-only filters admit "
                                       "right-answer-wrong-reasoning samples)"),
    "star.filter_room": Threshold(0.01, "design bound: the filters must disagree on at least 1 % of kept samples "
                                        "for their difference to be measurable"),
    "star.start_room": Threshold(0.9, "design bound: the start's forced S leaves at least 0.1 below the ceiling, "
                                      "over six standard errors of one seed's test accuracy (about 0.016 on 625 "
                                      "problems); the base model's near-perfect forced S left none, so STaR could only "
                                      "switch the format"),
    "rl.faster": Threshold(0.0, f"{DIRECTION}, in updates to greedy accuracy 0.99 (DeepSeekMath, arXiv 2402.03300: "
                                "GRPO's group baseline; REINFORCE without one is the textbook high-variance case)"),
    "rl.length_bias": Threshold(0.0, f"{DIRECTION} (Dr. GRPO, Liu et al. 2025, arXiv 2503.20783, section 3.1: "
                                     "GRPO's 1/|o_i| favours longer responses among wrong ones)"),
    "adaptive.acc_margin": Threshold(-0.01, "non-inferiority margin of one point of accuracy (Thinkless, arXiv "
                                            "2505.13379, keeps accuracy within about a point while cutting long "
                                            "chains)"),
    "adaptive.token_gain": Threshold(0.0, f"{DIRECTION}: fewer tokens than the control"),
    "l1.reads": Threshold(1.0, "practical margin: one more chain step at b = 8 than at b = 0 (a budget model that "
                               "ignores b writes the same chain at every b: 0)"),
    "l1.control": Threshold(0.9, "s1, arXiv 2501.19393, Table 3: budget forcing reaches 100 % Control; 90 % leaves "
                                 "room for a learned policy"),
    "l1.scaling": Threshold(0.0, f"{DIRECTION} (s1's Scaling: accuracy rises with compute)"),
    "l1.equal_tokens": Threshold(0.0, f"{DIRECTION} (L1, arXiv 2503.04697, Fig. 2: L1 beats s1 forcing at equal "
                                      "length)"),
    "l1.no_sft": Threshold(-1.0, "non-inferiority margin of one chain step of budget reading"),
    "l1.reads_over_blind": Threshold(1.0, "practical margin: one chain step more of spread (steps at b = 8 minus at "
                                          "b = 0) than the same RL with alpha = 0, whose budget token and RL alone "
                                          "are what a skeptic credits with any budget reading"),
    "l1.aware_gap": Threshold(0.05, "design bound: reading the budget must pay at least 0.05 of the L1 reward RL "
                                    "trains with (a twentieth of a right answer) before RL is asked to learn it"),
    "l1.beats_blind": Threshold(0.0, f"{DIRECTION} (L1, arXiv 2503.04697, section 3: the length term rewards "
                                     "meeting the budget, which a budget-blind policy cannot do at every b)"),
    "l1.reads_reachable": Threshold(1.0, "practical margin: one more chain step at the largest reachable budget "
                                         "(b = k) than at b = 0 (a model that ignores b writes the same chain: 0)"),
    "l1.rl_gain": Threshold(0.0, f"{DIRECTION}: GRPO maximises the reward it trains with, and its start, which already "
                                 "reads the budget, would earn that reward without RL"),
    "l1.kinds_apart": Threshold(0.0, f"{DIRECTION} (L1, arXiv 2503.04697, section 3.2: \"at most\" prompts leave "
                                     "the model free to stop early, \"exactly\" prompts do not)"),
    "search.beats": Threshold(0.0, f"{DIRECTION} (Hugging Face search-and-learn blog and Snell et al. 2024: "
                                   "verifier-guided methods beat majority and best-of-N)"),
    "search.non_inferior": Threshold(-0.01, "non-inferiority margin of one point of accuracy (DVTS matches or beats "
                                            "beam search at large N in the search-and-learn blog)"),
    "search.easy_tie": Threshold(0.02, "practical margin of two points: beam search over-optimises and ties or loses "
                                       "to best-of-N on easy problems at large N (Snell et al. 2024, Fig. 3)"),
    "search.no_fall": Threshold(0.02, "practical margin of two points, as search.easy_tie: a verifier's best-of-N "
                                      "may wobble by sampling noise, a fall beyond it means the verifier ranks "
                                      "wrong outputs first as N grows (Gao et al. 2022)"),
    "search.overopt": Threshold(0.0, "Gao et al. 2022 (arXiv 2210.10760): the true reward of a proxy-selected "
                                     "output stops rising, then falls, as selection pressure grows"),
    "search.label_margin": Threshold(0.05, "practical margin of five points (Math-Shepherd, arXiv 2312.08935, Table "
                                           "1: MC labels come within a few points of human-labelled PRMs)"),
    "search.saving": Threshold(0.0, f"{DIRECTION}, on the log of the token ratio (Snell et al. 2024: about 4x fewer "
                                    "tokens at equal accuracy; any saving, log ratio > 0, counts)"),
    "search.vote_gain": Threshold(0.0, f"{DIRECTION} (Wang et al. 2022, arXiv 2203.11171: majority over sampled "
                                       "chains beats greedy decoding)"),
    "search.acc_gap": Threshold(-0.02, "matched-accuracy bound: a token ratio is read only where the per-k choice is "
                                       "within two points of the single strategy's test accuracy"),
    "faithful.follows": Threshold(0.5, "practical: a majority of corrupted chains carry the answer with them (Lanham "
                                       "et al. 2023, arXiv 2307.13702, Fig. 4: answers change with added mistakes)"),
    "faithful.beats_truth": Threshold(0.0, f"{DIRECTION}: more answers follow the corrupted chain than give the "
                                           "truth the model computes without it"),
    "faithful.position": Threshold(0.0, f"{DIRECTION}: a late mistake is carried more often than an early one"),
    "faithful.trained": Threshold(0.0, f"{DIRECTION} (Chen et al. 2025, arXiv 2505.05410, section 4: outcome-based "
                                       "RL raises faithfulness at first)"),
    "faithful.direct": Threshold(0.8, "design bound: a model that ignored its chain would give the truth it computes "
                                      "without one on more than half the k = 2 problems, more often than any chain "
                                      "it follows; 0.8 leaves a margin, and one seed's value moves in steps of 0.04 "
                                      "on the 25 test problems"),
    "faithful.clean": Threshold(0.9, "design bound: the uncorrupted chain is right on at least 90 % at every k, so "
                                     "what the corrupted chain implies is read against a chain the model gets right"),
    "voting.vote_margin": Threshold(0.05, "practical margin: self-consistency gains +17.9 points on GSM8K (Wang et "
                                          "al. 2022, arXiv 2203.11171, Table 2); under 5 points is no rescue"),
    "voting.varies": Threshold(0.0, f"{DIRECTION} (Wang et al. 2022, arXiv 2203.11171: voting marginalises over "
                                    "diverse reasoning paths; errors repeated in every sample leave nothing to "
                                    "marginalise)"),
    "voting.search_varies": Threshold(0.0, f"{DIRECTION} (Snell et al. 2024, arXiv 2408.03314, section 5: a step "
                                           "search pays where a flawed step can be caught and sampled again; a "
                                           "misreading fixed in the weights comes back in every resample)"),
    "voting.prm_over_orm": Threshold(0.0, f"{DIRECTION} (Lightman et al. 2023, arXiv 2305.20050, Fig. 3: best-of-N "
                                          "with the PRM above the ORM at every N)"),
    "voting.orm_over_majority": Threshold(0.0, f"{DIRECTION} (Lightman et al. 2023, arXiv 2305.20050, Fig. 3: both "
                                               "reward models above majority voting)"),
    "voting.prm_over_majority": Threshold(0.0, f"{DIRECTION} (Lightman et al. 2023, arXiv 2305.20050, Fig. 3: both "
                                               "reward models above majority voting)"),
    "labels.fp_rise": Threshold(0.0, f"{DIRECTION} (Math-Shepherd, arXiv 2312.08935, section 3: the hard estimate "
                                     "counts a step right if any rollout reaches the answer)"),
    "labels.fn_fall": Threshold(0.0, f"{DIRECTION}: more rollouts find the answer from a right step"),
    "labels.fp_level": Threshold(0.05, "practical margin of five points: a label noise level that moves a PRM's "
                                       "training data"),
    "labels.prm_noise": Threshold(0.0, f"{DIRECTION} (Math-Shepherd, arXiv 2312.08935, Table 3 and Fig. 4: PRMs "
                                       "trained on human (PRM800K) labels against rollout labels; the label quality "
                                       "bounds the PRM)"),
    "labels.prm_label_bon": Threshold(0.0, f"{DIRECTION} (Math-Shepherd, arXiv 2312.08935, Table 3: best-of-N "
                                           "with a PRM rises with the quality of its labels)"),
    "labels.prm_rollouts": Threshold(0.0, f"{DIRECTION} (Math-Shepherd, arXiv 2312.08935, section 4.5: label quality "
                                          "rises with the number of completions N)"),
    "labels.prm_bon": Threshold(0.0, f"{DIRECTION} (Math-Shepherd, arXiv 2312.08935, Table 1: best-of-256 with its "
                                     "PRM beats self-consistency)"),
    "passk.catch_up": Threshold(0.0, f"{DIRECTION} (Yue et al. 2025, arXiv 2504.13837, Fig. 1: the base model "
                                     "catches up with and passes the RL model at large k)"),
    "passk.expands": Threshold(0.0, f"{DIRECTION} (ProRL, arXiv 2505.24864: prolonged RL solves problems where "
                                    "the base's pass@k is 0; against Yue et al. 2025, arXiv 2504.13837, whose RL only "
                                    "sharpens): past the pass@N that sharpening alone, to RL's pass@1, would give"),
    "passk.room": Threshold(10.0, "design bound: at least ten problems per seed that the start practically never "
                                  "samples, so that a seed's pass@N there is a share, not one or two problems"),
    "passk.shrinks": Threshold(0.0, f"{DIRECTION} (Yue et al. 2025, section 3: problems the base solves at large k "
                                    "that the RL model no longer solves)"),
    "kl.grad_gap": Threshold(0.1, "practical margin: a tenth of the KL gradient's length (Tang & Munos 2025, "
                                  "arXiv 2506.09477: k3 in the loss follows the forward KL's gradient, not the "
                                  "reverse KL's; near the reference the two agree, so the gap is one of size)"),
    "kl.direction": Threshold(0.99, "practical: a cosine of 0.99 (about 8 degrees) to the KL's gradient, a step "
                                    "that moves along the KL's gradient within rounding"),
    "kl.seq_gap": Threshold(0.1, "practical margin: a tenth of the sequence KL gradient's norm off it (Tang & Munos "
                                 "2025, arXiv 2506.09477: a per-token KL loss drops the terms by which a token moves "
                                 "the KL of the positions after it)"),
    "kl.moved": Threshold(0.01, "design bound: a hundredth of a nat per token from the reference, for the two KLs' "
                                "gradients (equal to first order at the reference) to differ measurably"),
    "kl.k3_std": Threshold(0.0, f"{DIRECTION} (Schulman 2020, \"Approximating KL divergence\": k3 has lower "
                                "variance than k1)"),
    "kl.beta_drop": Threshold(0.0, f"{DIRECTION}: the KL penalty keeps the policy near the reference (Ziegler et "
                                   "al. 2019, arXiv 1909.08593)"),
    "entropy.clip_keeps": Threshold(0.0, f"{DIRECTION} (DAPO, arXiv 2503.14476, section 3.1: clip-higher keeps the "
                                         "policy's entropy from collapsing)"),
    "entropy.clip_pays": Threshold(0.0, f"{DIRECTION}, in greedy accuracy along the run (DAPO's ablation: "
                                        "clip-higher adds 2 points on AIME24)"),
    "entropy.clip_faster": Threshold(0.0, f"{DIRECTION}, in steps to greedy accuracy 0.99 (DAPO: more exploration, "
                                          "faster progress)"),
    "entropy.bonus_keeps": Threshold(0.0, f"{DIRECTION} (Cui et al., arXiv 2505.22617: an entropy bonus of 5e-3 "
                                          "held entropy up, stably)"),
    "entropy.zero_std_rise": Threshold(0.0, f"{DIRECTION} (DAPO, arXiv 2503.14476, section 3.2 and Fig. 3b: the "
                                            "share of prompts whose samples are all right keeps growing, and their "
                                            "groups give no gradient)"),
    "entropy.start_h": Threshold(0.5, "design bound: the start's format entropy must exceed half a nat (ln 3 = 1.10 "
                                      "over the three formats) for a collapse to be measurable"),
    "entropy.grpo_lowers": Threshold(0.0, "premise: GRPO lowers the format entropy (Cui et al. 2025, arXiv "
                                          "2505.22617: the policy's entropy collapses early under RL)"),
    "entropy.room": Threshold(0.0, "premise: GRPO leaves room to beat it (accuracy below 1, not solved at its first "
                                   "probe)"),
}
"""name -> Threshold(value, source)"""

POINTS = "practical: five points of accuracy (the margin of voting.vote_margin), the smallest gain a lesson reports"
EFFECTS: dict[str, Threshold] = {
    "budgets": Threshold(0.05, POINTS),
    "star": Threshold(0.05, POINTS),
    "rl": Threshold(5.0, "practical: five updates to greedy accuracy 0.99, a twelfth of the 60-step run"),
    "adaptive": Threshold(0.01, "the non-inferiority margin itself: a method as accurate as the control (difference "
                                "0) must be shown above -0.01"),
    "l1": Threshold(1.0, "practical: one chain step of spread past the claim's one-step margin"),
    "search": Threshold(0.05, POINTS),
    "faithful": Threshold(0.05, "practical: five points of share between following the chain and the truth"),
    "labels": Threshold(0.05, "practical: five points of AUROC (Math-Shepherd, arXiv 2312.08935, Table 3: PRMs on "
                              "different labels differ by a few points)"),
    "entropy": Threshold(0.1, "practical: a tenth of a nat of format entropy (about a tenth of ln 3, the three "
                              "formats' maximum)"),
    "kl": Threshold(0.1, "practical: a length off by a fifth, twice the claim's margin of a tenth"),
    "passk": Threshold(0.1, "practical: ten points of pass@N past what pure sharpening gives"),
    "voting": Threshold(0.05, POINTS),
    "l1_recipe": Threshold(0.05, "practical: 0.05 of L1's reward (at most 1 per output), the margin of l1.aware_gap"),
}
"""experiment -> the smallest effect past its primary's threshold that the primary is designed to detect with 80 %
power (stats.power), fixed before the run with its source"""


def table() -> str:
    rows = ["| threshold | value | source |", "|---|---|---|"]
    rows += [f"| `{k}` | {t.value:g} | {t.source} |" for k, t in THRESHOLDS.items()]
    return "\n".join(rows)
