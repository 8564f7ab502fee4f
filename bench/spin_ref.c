/*
 * spin_ref.c - C reference of softrt's spin loop on the virtual board (bench/run_bench.py).
 *
 * The same semantics as softrt.loop.cyclic.run_cycles(wait="spin") driving
 * softrt.board.VirtualBoard, with nothing but C in between:
 *
 *   board: edge k at t0 + k * period (CLOCK_MONOTONIC); permit = now >= edge;
 *          write(v) reads the clock, latches v, window = (now - t0) / period,
 *          missed = window - cycle, cycle = window + 1, edge = t0 + cycle * period
 *          (a late write resynchronises the host to the edge after the write).
 *   loop:  out = step(0)
 *          repeat: cycle = board.cycle; edge = board.edge
 *                  while (!permit()) ;          (busy poll, the seed's step 1)
 *                  detect = now()
 *                  missed = write(out)          (step 2)
 *                  written = now()
 *                  out = step(++seq)            (step 3, a trivial next-target computation)
 *                  done = now()
 *                  store record {seq, cycle, edge, detect, written, done, missed, flags, rtt, wkc}
 *                  (rtt and wkc are 0, as on softrt's virtual board: no frames)
 *          until done >= end or SIGINT/SIGTERM.
 *
 * Real-time controls as softrt's worker: sched_setaffinity, mlockall, /dev/cpu_dma_latency = 0
 * held open, timer slack 1 ns, SCHED_FIFO; first edge 2 ms after the start; records in a
 * pre-faulted array, written after the loop as 10 x int64 per cycle, in softrt's record order
 * (seq, cycle, edge_ns, detect_ns, write_ns, done_ns, missed, flags, rtt_ns, wkc).
 *
 * usage: spin_ref PERIOD_NS DURATION_NS CPU PRIORITY OUTFILE
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define START_LEAD_NS 2000000LL
#define WARMUP 2000
#define FLAG_MISSED 1

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) { (void)sig; stop_requested = 1; }

static inline int64_t mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The virtual board (softrt.board.VirtualBoard). */
struct board {
	int64_t period, t0, edge, cycle, writes, missed_total, flags, last_rtt_ns, last_wkc;
	volatile double latched; /* the output register: the store must happen */
};

static inline int permit(const struct board *b) { return mono() >= b->edge; }

static inline int64_t board_write(struct board *b, double value)
{
	int64_t now = mono();
	b->latched = value;
	int64_t window = (now - b->t0) / b->period;
	int64_t missed = window - b->cycle;
	b->missed_total += missed;
	b->writes++;
	b->cycle = window + 1;
	b->edge = b->t0 + b->cycle * b->period;
	return missed;
}

/* The trivial next-target computation: a smoothstep move 0 -> D, a dwell, back, for ever. */
struct motion {
	double period_s, t_move, dist, k, half;
	int back;
};

static inline double step(struct motion *m)
{
	double t = m->k * m->period_s, p;
	if (t < m->t_move) {
		double u = t / m->t_move;
		p = m->dist * (u * u * (3.0 - 2.0 * u));
	} else {
		p = m->dist;
	}
	if (m->back)
		p = m->dist - p;
	m->k += 1.0;
	if (m->k == m->half) {
		m->k = 0.0;
		m->back = !m->back;
	}
	return p;
}

struct record { int64_t seq, cycle, edge_ns, detect_ns, write_ns, done_ns, missed, flags, rtt_ns, wkc; };

static void die(const char *what)
{
	fprintf(stderr, "spin_ref: %s: %s\n", what, strerror(errno));
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: %s PERIOD_NS DURATION_NS CPU PRIORITY OUTFILE\n", argv[0]);
		return 2;
	}
	int64_t period = atoll(argv[1]), duration = atoll(argv[2]);
	int cpu = atoi(argv[3]), prio = atoi(argv[4]);
	const char *outfile = argv[5];
	if (period <= 0 || duration <= 0) {
		fprintf(stderr, "spin_ref: period and duration must be positive\n");
		return 2;
	}

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	/* Arm: the same controls, in the same order, as softrt's worker (_arm). */
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
	if (mlockall(MCL_CURRENT | MCL_FUTURE))
		die("mlockall");
	int dma_fd = open("/dev/cpu_dma_latency", O_WRONLY);
	if (dma_fd >= 0) {
		int32_t zero = 0;
		if (write(dma_fd, &zero, sizeof(zero)) != sizeof(zero))
			fprintf(stderr, "spin_ref: cpu_dma_latency not set: %s\n", strerror(errno));
	}
	prctl(PR_SET_TIMERSLACK, 1UL);
	struct sched_param sp = { .sched_priority = prio };
	if (sched_setscheduler(0, SCHED_FIFO, &sp))
		die("sched_setscheduler(SCHED_FIFO)");

	size_t cap = (size_t)(duration / period) + 16;
	struct record *rec = malloc(cap * sizeof(*rec));
	if (!rec)
		die("malloc");
	memset(rec, 0, cap * sizeof(*rec)); /* pre-fault (mlockall also locks it) */

	struct motion m = { .period_s = period / 1e9, .t_move = 0.05, .dist = 10000.0, .k = 0.0,
			    .half = 0.0, .back = 0 };
	m.half = (double)((int64_t)((m.t_move + 0.02) / m.period_s) + 1);
	volatile double sink = 0.0;
	for (int i = 0; i < WARMUP; i++) /* as softrt warms its step */
		sink += step(&m);
	m.k = 0.0;
	m.back = 0;

	struct board b = { .period = period };
	int64_t t0 = mono() + START_LEAD_NS, end = t0 + duration;
	b.t0 = b.edge = t0;
	b.cycle = 0;

	int64_t seq = 0;
	double out = step(&m);
	for (;;) {
		int64_t cycle = b.cycle, edge = b.edge;
		while (!permit(&b))
			;
		int64_t detect = mono();
		int64_t missed = board_write(&b, out);
		int64_t written = mono();
		seq++;
		out = step(&m);
		int64_t done = mono();
		if ((size_t)seq <= cap) {
			struct record *r = &rec[seq - 1];
			r->seq = seq - 1;
			r->cycle = cycle;
			r->edge_ns = edge;
			r->detect_ns = detect;
			r->write_ns = written;
			r->done_ns = done;
			r->missed = missed;
			r->flags = b.flags | (missed ? FLAG_MISSED : 0);
			r->rtt_ns = b.last_rtt_ns;
			r->wkc = b.last_wkc;
		}
		if (done >= end || stop_requested || (size_t)seq >= cap)
			break;
	}

	sp.sched_priority = 0;
	sched_setscheduler(0, SCHED_OTHER, &sp);
	if (dma_fd >= 0)
		close(dma_fd);

	size_t n = (size_t)seq < cap ? (size_t)seq : cap;
	FILE *f = fopen(outfile, "wb");
	if (!f)
		die("fopen");
	if (fwrite(rec, sizeof(*rec), n, f) != n)
		die("fwrite");
	fclose(f);
	printf("{\"cycles\": %zu, \"writes\": %lld, \"missed_updates\": %lld, \"interrupted\": %d}\n", n,
	       (long long)b.writes, (long long)b.missed_total, (int)stop_requested);
	return 0;
}
