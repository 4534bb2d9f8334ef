/*  test_worker_grade - the grading core's timing statistics and the
    adaptive timing rule, on synthetic samples (no runner, no clock).  */
#include "testutil.h"
#include "worker_grade.h"
#include <math.h>

//  A reproducible jitter in [-1, 1) (xorshift), so samples are noisy but fixed.
static double
s_jitter (uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return (double) (x >> 11) / 4503599627370496.0 - 1.0;
}

//  Feed pairs (candidate cand_us, baseline base_us, each with relative
//  noise `noise`) to a rule of max runs until it stops; returns the runs
//  made and the reason in *why.
static uint32_t
s_time (uint32_t max, double clip, double cand_us, double base_us, double noise,
        worker_grade_stop_why_t *why)
{
    double *cand = calloc (max, sizeof (double)), *base = calloc (max, sizeof (double));
    ck_assert (cand && base);
    worker_grade_stop_t rule;
    worker_grade_stop_init (&rule, max, clip);
    uint64_t state = 0x9E3779B97F4A7C15ull;
    uint32_t n = 0;
    *why = GRADE_STOP_NONE;
    while (*why == GRADE_STOP_NONE) {
        ck_assert_uint_lt (n, max);
        cand [n] = cand_us * (1 + noise * s_jitter (&state));
        base [n] = base_us * (1 + noise * s_jitter (&state));
        double last = cand [n];
        n++;
        *why = worker_grade_stop_check_n (&rule, cand, n, base, n);
        //  The samples are the caller's: left in the order they came.
        ck_assert_double_eq (cand [n - 1], last);
    }
    free (cand);
    free (base);
    return n;
}

START_TEST (test_stable_samples_stop_precise_well_before_the_maximum)
{
    worker_grade_stop_why_t why;
    //  0.2% noise on both: +-1% is reached within a few runs past the minimum.
    uint32_t n = s_time (1000, 2.0, 100.0, 150.0, 0.002, &why);
    ck_assert_int_eq (why, GRADE_STOP_PRECISE);
    ck_assert_uint_ge (n, WORKER_GRADE_STOP_MIN);
    ck_assert_uint_le (n, 20);
}
END_TEST

START_TEST (test_noisier_samples_take_more_runs)
{
    worker_grade_stop_why_t quiet, noisy;
    uint32_t n_quiet = s_time (1000, 2.0, 100.0, 120.0, 0.002, &quiet);
    uint32_t n_noisy = s_time (1000, 2.0, 100.0, 120.0, 0.05, &noisy);
    ck_assert_int_eq (quiet, GRADE_STOP_PRECISE);
    ck_assert_uint_gt (n_noisy, n_quiet);
    //  +-5% noise still ends within the maximum, precise.
    ck_assert_int_eq (noisy, GRADE_STOP_PRECISE);
    //  Too noisy for 50 runs: the maximum ends it.
    worker_grade_stop_why_t why;
    ck_assert_uint_eq (s_time (50, 2.0, 100.0, 120.0, 0.5, &why), 50);
    ck_assert_int_eq (why, GRADE_STOP_MAX_RUNS);
}
END_TEST

START_TEST (test_a_clipped_or_settled_reward_stops_at_the_minimum)
{
    worker_grade_stop_why_t why;
    //  10x faster than the baseline, clip 2: the reward is 2 whatever comes.
    ck_assert_uint_eq (s_time (1000, 2.0, 10.0, 100.0, 0.1, &why), WORKER_GRADE_STOP_MIN);
    ck_assert_int_eq (why, GRADE_STOP_CLIPPED);
    //  100x slower: settled below the floor, even noisy.
    ck_assert_uint_eq (s_time (1000, 2.0, 10000.0, 100.0, 0.2, &why), WORKER_GRADE_STOP_MIN);
    ck_assert_int_eq (why, GRADE_STOP_SETTLED);
    //  Without a clip a fast kernel is timed until precise.
    s_time (1000, 0.0, 10.0, 100.0, 0.002, &why);
    ck_assert_int_eq (why, GRADE_STOP_PRECISE);
}
END_TEST

START_TEST (test_never_fewer_than_the_minimum_nor_more_than_the_maximum)
{
    worker_grade_stop_why_t why;
    //  Identical samples: precise from the first run, still the minimum is made.
    ck_assert_uint_eq (s_time (1000, 2.0, 100.0, 100.0, 0.0, &why), WORKER_GRADE_STOP_MIN);
    ck_assert_int_eq (why, GRADE_STOP_PRECISE);
    //  A maximum under the minimum: exactly the maximum.
    ck_assert_uint_eq (s_time (3, 2.0, 100.0, 100.0, 0.0, &why), 3);
    ck_assert_int_eq (why, GRADE_STOP_MAX_RUNS);
    ck_assert_uint_eq (s_time (1, 2.0, 100.0, 100.0, 0.0, &why), 1);
    ck_assert_int_eq (why, GRADE_STOP_MAX_RUNS);
}
END_TEST

//  A baseline timed alone first (the Python backend on a GPU): a steady one
//  is enough after the minimum, a noisy one is not; the candidate's runs are
//  then judged against however many it has.
START_TEST (test_a_baseline_timed_apart)
{
    worker_grade_stop_t rule;
    worker_grade_stop_init (&rule, 100, 2.0);
    double base [100], cand [100];
    uint64_t state = 0x243F6A8885A308D3ull;
    uint32_t nb = 0;
    while (nb < 100 && !worker_grade_stop_baseline (&rule, base, nb)) {
        base [nb] = 150.0 * (1 + 0.002 * s_jitter (&state));
        nb++;
    }
    ck_assert_uint_ge (nb, WORKER_GRADE_STOP_MIN);
    ck_assert_uint_le (nb, 10);
    //  Not before the minimum, however steady.
    ck_assert (!worker_grade_stop_baseline (&rule, base, WORKER_GRADE_STOP_MIN - 1));
    //  20% noise: not known well enough in 30 runs.
    double noisy [30];
    for (int i = 0; i < 30; i++)
        noisy [i] = 150.0 * (1 + 0.2 * s_jitter (&state));
    ck_assert (!worker_grade_stop_baseline (&rule, noisy, 30));
    //  The candidate's steady runs against the nb baseline samples: precise,
    //  and the interval the same as the speedup's (ncand != nbase).
    worker_grade_stop_why_t why = GRADE_STOP_NONE;
    uint32_t n = 0;
    while (why == GRADE_STOP_NONE) {
        cand [n] = 100.0 * (1 + 0.002 * s_jitter (&state));
        n++;
        why = worker_grade_stop_check_n (&rule, cand, n, base, nb);
    }
    ck_assert_int_eq (why, GRADE_STOP_PRECISE);
    ck_assert_uint_le (n, 20);
    double lo, hi;
    double speedup = worker_grade_speedup (cand, n, base, nb, &lo, &hi);
    ck_assert (lo <= speedup && speedup <= hi && hi / lo < 1.021);
    ck_assert_double_eq_tol (speedup, 1.5, 0.01);
}
END_TEST

START_TEST (test_the_rule_on_intervals)
{
    worker_grade_stop_t rule;
    worker_grade_stop_init (&rule, 100, 2.0);
    ck_assert_int_eq (worker_grade_stop_judge (&rule, 0.995, 1.0, 1.01), GRADE_STOP_PRECISE);
    ck_assert_int_eq (worker_grade_stop_judge (&rule, 0.98, 1.0, 1.005), GRADE_STOP_NONE);
    ck_assert_int_eq (worker_grade_stop_judge (&rule, 0.995, 1.0, 1.02), GRADE_STOP_NONE);
    ck_assert_int_eq (worker_grade_stop_judge (&rule, 2.0, 3.0, 9.0), GRADE_STOP_CLIPPED);
    ck_assert_int_eq (worker_grade_stop_judge (&rule, 1.9, 3.0, 9.0), GRADE_STOP_NONE);
    ck_assert_int_eq (worker_grade_stop_judge (&rule, 0.001, 0.01, 0.05), GRADE_STOP_SETTLED);
    ck_assert_int_eq (worker_grade_stop_judge (&rule, 0.001, 0.01, 0.051), GRADE_STOP_NONE);
    //  Nothing to judge: go on (the maximum ends it).
    ck_assert_int_eq (worker_grade_stop_judge (&rule, 0, 0, 0), GRADE_STOP_NONE);
    ck_assert_int_eq (worker_grade_stop_judge (&rule, NAN, 1.0, 1.0), GRADE_STOP_NONE);
    ck_assert_int_eq (worker_grade_stop_judge (&rule, 1.0, 1.0, INFINITY), GRADE_STOP_NONE);
    ck_assert_int_eq (worker_grade_stop_judge (&rule, 1.1, 1.0, 1.0), GRADE_STOP_NONE);
    //  A rule part set to 0 never stops timing.
    worker_grade_stop_t none = rule;
    none.precision = none.clip = none.floor = 0;
    ck_assert_int_eq (worker_grade_stop_judge (&none, 1.0, 1.0, 1.0), GRADE_STOP_NONE);
    ck_assert_int_eq (worker_grade_stop_judge (&none, 5.0, 6.0, 7.0), GRADE_STOP_NONE);
    ck_assert_int_eq (worker_grade_stop_judge (&none, 0.001, 0.002, 0.003), GRADE_STOP_NONE);
    //  The defaults, as documented.
    ck_assert_uint_eq (rule.min_runs, 5);
    ck_assert_double_eq (rule.precision, 0.01);
    ck_assert_double_eq (rule.floor, 0.05);
    ck_assert_double_eq (rule.clip, 2.0);
}
END_TEST

//  Paired runs are judged on whole rounds only: never after an odd run
//  (its other half is missing), first after the minimum's last whole round
//  (4 runs for 5); a maximum reached on an odd run still ends it.
START_TEST (test_paired_rule_on_whole_rounds)
{
    double cand [8], base [8];
    for (int i = 0; i < 8; i++) {
        cand [i] = 30.0 + 0.01 * (i % 3);       //  3.3x faster than the baseline: clipped,
        base [i] = 100.0 - 0.02 * (i % 2);      //  not twice the clip (the first round's margin)
    }
    worker_grade_stop_t rule;
    worker_grade_stop_init (&rule, 100, 2.0);
    ck_assert_int_eq (worker_grade_stop_check_paired (&rule, cand, base, 2), GRADE_STOP_NONE);
    ck_assert_int_eq (worker_grade_stop_check_paired (&rule, cand, base, 3), GRADE_STOP_NONE);
    ck_assert_int_eq (worker_grade_stop_check_paired (&rule, cand, base, 4), GRADE_STOP_CLIPPED);
    //  An odd count is not looked at even past the minimum.
    worker_grade_stop_init (&rule, 100, 2.0);
    ck_assert_int_eq (worker_grade_stop_check_paired (&rule, cand, base, 5), GRADE_STOP_NONE);
    ck_assert_int_eq (worker_grade_stop_check_paired (&rule, cand, base, 6), GRADE_STOP_CLIPPED);
    //  The maximum on an odd run.
    worker_grade_stop_init (&rule, 5, 2.0);
    ck_assert_int_eq (worker_grade_stop_check_paired (&rule, cand, base, 5), GRADE_STOP_MAX_RUNS);
    //  Steady and close to 1: precise needs three rounds (6 runs), not two.
    for (int i = 0; i < 8; i++)
        base [i] = cand [i];
    worker_grade_stop_init (&rule, 100, 2.0);
    ck_assert_int_eq (worker_grade_stop_check_paired (&rule, cand, base, 4), GRADE_STOP_NONE);
    ck_assert_int_eq (worker_grade_stop_check_paired (&rule, cand, base, 6), GRADE_STOP_PRECISE);
}
END_TEST

//  The first round alone ends timing when its ratio lies the margin (2x)
//  past a line: at or above twice the clip, at or below half the floor.
//  Anything nearer waits for the minimum's rounds; a rule without a margin
//  (or a maximum of 2) is as before.
START_TEST (test_first_round_far_past_a_line)
{
    double cand [4], base [4] = { 100.0, 100.2, 99.9, 100.1 };
    struct { double cand_us; worker_grade_stop_why_t at2, at4; } cases [] = {
        { 10.0, GRADE_STOP_CLIPPED, GRADE_STOP_CLIPPED },      //  10x: past 2 x clip 2
        { 24.0, GRADE_STOP_CLIPPED, GRADE_STOP_CLIPPED },      //  4.2x: just past it
        { 30.0, GRADE_STOP_NONE, GRADE_STOP_CLIPPED },         //  3.3x: two rounds
        { 10000.0, GRADE_STOP_SETTLED, GRADE_STOP_SETTLED },   //  100x slower: below 0.05 / 2
        { 2500.0, GRADE_STOP_NONE, GRADE_STOP_SETTLED },       //  25x slower: 0.04, two rounds
        { 100.0, GRADE_STOP_NONE, GRADE_STOP_NONE },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases [0]; c++) {
        for (int i = 0; i < 4; i++)
            cand [i] = cases [c].cand_us * (1 + 0.001 * (i % 2));
        worker_grade_stop_t rule;
        worker_grade_stop_init (&rule, 100, 2.0);
        ck_assert_double_eq (rule.margin, WORKER_GRADE_STOP_MARGIN);
        ck_assert_int_eq (worker_grade_stop_check_paired (&rule, cand, base, 1), GRADE_STOP_NONE);
        ck_assert_msg (worker_grade_stop_check_paired (&rule, cand, base, 2) == cases [c].at2,
                       "case %zu after one round", c);
        ck_assert_msg (worker_grade_stop_check_paired (&rule, cand, base, 4) == cases [c].at4,
                       "case %zu after two rounds", c);
        //  Without the margin: nothing before the minimum's rounds.
        worker_grade_stop_init (&rule, 100, 2.0);
        rule.margin = 0;
        ck_assert_int_eq (worker_grade_stop_check_paired (&rule, cand, base, 2), GRADE_STOP_NONE);
    }
    //  A maximum of 2 is the minimum too: it ends as the maximum.
    for (int i = 0; i < 4; i++)
        cand [i] = 10.0;
    worker_grade_stop_t rule;
    worker_grade_stop_init (&rule, 2, 2.0);
    ck_assert_int_eq (worker_grade_stop_check_paired (&rule, cand, base, 2), GRADE_STOP_MAX_RUNS);
}
END_TEST

START_TEST (test_stop_names)
{
    const char *names [] = { "precise", "clipped", "settled", "max_runs" };
    for (int i = 0; i < 4; i++) {
        worker_grade_stop_why_t why = worker_grade_stop_from_name (names [i]);
        ck_assert_int_ne (why, GRADE_STOP_NONE);
        ck_assert_str_eq (worker_grade_stop_name (why), names [i]);
    }
    ck_assert_int_eq (worker_grade_stop_from_name ("sometime"), GRADE_STOP_NONE);
    ck_assert_int_eq (worker_grade_stop_from_name (NULL), GRADE_STOP_NONE);
    ck_assert_str_eq (worker_grade_stop_name (GRADE_STOP_NONE), "");
    ck_assert_str_eq (worker_grade_stop_name ((worker_grade_stop_why_t) 99), "");
}
END_TEST

START_TEST (test_speedup_interval_holds_the_speedup)
{
    double cand [9], base [9];
    for (int i = 0; i < 9; i++) {
        cand [i] = 100 + i;
        base [i] = 200 + 2 * i;
    }
    double lo, hi;
    double s = worker_grade_speedup (cand, 9, base, 9, &lo, &hi);
    ck_assert_double_eq_tol (s, 208.0 / 104.0, 1e-12);
    ck_assert (lo > 0 && lo <= s && s <= hi);
}
END_TEST

//  Paired samples across a change of the host's speed: the same program
//  on both sides, fast for runs 0-4 and 1.8x slower from run 5, the change
//  falling inside run 4 (its candidate already slow, its baseline not).
//  The two medians apart say 0.78; the runs' ratios say 1, exactly.
START_TEST (test_paired_speedup_across_a_change_of_speed)
{
    double cand [10], base [10];
    for (int i = 0; i < 10; i++) {
        cand [i] = i >= 4? 180.0: 100.0;
        base [i] = i >= 5? 180.0: 100.0;
    }
    double lo, hi;
    ck_assert_double_eq_tol (worker_grade_speedup_paired (cand, base, 10, &lo, &hi), 1.0, 1e-12);
    ck_assert (lo <= 1.0 && hi >= 1.0);
    //  Not modified (the caller's pairs stay pairs).
    ck_assert_double_eq (cand [4], 180.0);
    ck_assert_double_eq (base [4], 100.0);
    double c2 [10], b2 [10];
    memcpy (c2, cand, sizeof c2);
    memcpy (b2, base, sizeof b2);
    double apart = worker_grade_speedup (c2, 10, b2, 10, NULL, NULL);
    ck_assert_double_eq_tol (apart, 140.0 / 180.0, 1e-12);
    //  A real difference survives pairing: 2x in every pair, noise and a
    //  change of speed on top.
    uint64_t state = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 10; i++) {
        double host = i >= 5? 1.8: 1.0;
        cand [i] = 100.0 * host * (1 + 0.01 * s_jitter (&state));
        base [i] = 200.0 * host * (1 + 0.01 * s_jitter (&state));
    }
    ck_assert_double_eq_tol (worker_grade_speedup_paired (cand, base, 10, &lo, &hi), 2.0, 0.05);
    ck_assert (lo > 1.9 && hi < 2.1);
    //  Nothing positive to pair: 0.
    cand [0] = 0;
    ck_assert_double_eq (worker_grade_speedup_paired (cand, base, 1, &lo, &hi), 0);
    ck_assert_double_eq (worker_grade_speedup_paired (cand, base, 0, NULL, NULL), 0);
}
END_TEST

//  Pairs whose second call is slower (the first's data pushed the second's
//  out of the caches), who goes first alternating: the runs' ratios fall in
//  two clusters, 1.4x apart; each round of two, one of each order, cancels
//  it. The same program on both sides reads 1, a 2x faster one 2, and the
//  stop rule finds them precise.
START_TEST (test_paired_order_effect_cancelled)
{
    for (int c = 0; c < 2; c++) {
        double truth = c? 2.0: 1.0;
        double cand [41], base [41], ratio [41];
        uint64_t state = 0xC0FFEEull + (uint64_t) c;
        worker_grade_stop_t rule;
        worker_grade_stop_init (&rule, 41, 4.0);
        worker_grade_stop_why_t why = GRADE_STOP_NONE;
        uint32_t n = 0;
        while (why == GRADE_STOP_NONE) {
            bool base_first = n % 2 == 0;
            cand [n] = 450.0 / truth * (base_first? 1.4: 1.0) * (1 + 0.002 * s_jitter (&state));
            base [n] = 450.0 * (base_first? 1.0: 1.4) * (1 + 0.002 * s_jitter (&state));
            ratio [n] = base [n] / cand [n];
            n++;
            why = worker_grade_stop_check_paired (&rule, cand, base, n);
        }
        ck_assert_int_eq (why, GRADE_STOP_PRECISE);
        double lo, hi;
        double speedup = worker_grade_speedup_paired (cand, base, n, &lo, &hi);
        ck_assert_double_eq_tol (speedup, truth, truth * 0.005);
        ck_assert (lo <= speedup && speedup <= hi && hi - lo < truth * 0.02);
        //  The runs' ratios alone: two clusters, ~0.71 and ~1.4 of the truth.
        uint32_t low = 0;
        for (uint32_t i = 0; i < n; i++)
            low += ratio [i] < truth;
        ck_assert (low > 0 && low < n);
        for (uint32_t i = 0; i < n; i++)
            ck_assert (fabs (ratio [i] / truth - 1) > 0.25);
    }
    //  One run: its ratio; an odd last run is left out.
    double c1 [3] = { 100, 100, 100 }, b1 [3] = { 150, 100, 400 };
    ck_assert_double_eq_tol (worker_grade_speedup_paired (c1, b1, 1, NULL, NULL), 1.5, 1e-12);
    ck_assert_double_eq_tol (worker_grade_speedup_paired (c1, b1, 3, NULL, NULL), sqrt (1.5), 1e-12);
}
END_TEST

//  The stop rule on paired samples: stable pairs stop precise; pairs whose
//  host speed changes every few runs still do (their ratios stay put).
START_TEST (test_paired_stop_rule)
{
    double cand [200], base [200];
    worker_grade_stop_t rule;
    worker_grade_stop_init (&rule, 200, 2.0);
    uint64_t state = 0x12345678ull;
    worker_grade_stop_why_t why = GRADE_STOP_NONE;
    uint32_t n = 0;
    while (why == GRADE_STOP_NONE) {
        double host = (n / 3) % 2? 1.8: 1.0;
        cand [n] = 100.0 * host * (1 + 0.002 * s_jitter (&state));
        base [n] = 150.0 * host * (1 + 0.002 * s_jitter (&state));
        n++;
        why = worker_grade_stop_check_paired (&rule, cand, base, n);
    }
    ck_assert_int_eq (why, GRADE_STOP_PRECISE);
    ck_assert_uint_le (n, 20);
    //  The same samples apart: the host's two speeds make each median's
    //  interval wide, and the rule goes on far longer.
    worker_grade_stop_init (&rule, 200, 2.0);
    why = GRADE_STOP_NONE;
    uint32_t m = 0;
    while (why == GRADE_STOP_NONE && m < n) {
        m++;
        why = worker_grade_stop_check_n (&rule, cand, m, base, m);
    }
    ck_assert_int_eq (why, GRADE_STOP_NONE);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("worker_grade");
    TCase *tc = tcase_create ("timing");
    tcase_add_test (tc, test_stable_samples_stop_precise_well_before_the_maximum);
    tcase_add_test (tc, test_noisier_samples_take_more_runs);
    tcase_add_test (tc, test_a_clipped_or_settled_reward_stops_at_the_minimum);
    tcase_add_test (tc, test_never_fewer_than_the_minimum_nor_more_than_the_maximum);
    tcase_add_test (tc, test_a_baseline_timed_apart);
    tcase_add_test (tc, test_the_rule_on_intervals);
    tcase_add_test (tc, test_paired_rule_on_whole_rounds);
    tcase_add_test (tc, test_first_round_far_past_a_line);
    tcase_add_test (tc, test_stop_names);
    tcase_add_test (tc, test_speedup_interval_holds_the_speedup);
    tcase_add_test (tc, test_paired_speedup_across_a_change_of_speed);
    tcase_add_test (tc, test_paired_stop_rule);
    tcase_add_test (tc, test_paired_order_effect_cancelled);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
