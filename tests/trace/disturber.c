/*
 * disturber.c - a known-answer disturber for softrt's late-cycle attribution (tests/trace).
 *
 * usage: disturber NAME CPU POLICY PRIORITY SPIN_US EVERY_US
 *
 *   Pins itself to CPU (sched_setaffinity(2)), names itself NAME (prctl(2) PR_SET_NAME: the comm
 *   the trace shows), takes POLICY "fifo" (SCHED_FIFO at PRIORITY, sched_setscheduler(2)) or
 *   "other" (SCHED_OTHER), then:
 *     SPIN_US > 0: every EVERY_US (absolute clock_nanosleep(2) on CLOCK_MONOTONIC) it busy-spins
 *                  SPIN_US and records the spike's timer deadline, the start and the end of its
 *                  spin in CLOCK_MONOTONIC ns: it held the CPU at least from start to end and at
 *                  most from the deadline (timer IRQ, switch and steal before it ran) to the end;
 *                  and the CPU time it ran since the previous spike's end (its sleep and wake-up
 *                  paths included; CLOCK_THREAD_CPUTIME_ID, clock_gettime(2): the scheduler's
 *                  count, which leaves out hypervisor steal); and the time its spin did not spin:
 *                  the sum of the jumps of more than GAP_NS between two consecutive clock reads
 *                  (an interrupt, the hypervisor, a task that preempted it held the CPU meanwhile;
 *                  on the benchmark VM a local timer IRQ of 200 µs inside a spike was seen as
 *                  one such jump, right where the trace has local_timer_entry/exit);
 *     SPIN_US = 0: it spins in user space without a system call until stopped (a busy task).
 *   It prints "ready" on stderr once set up; on SIGTERM/SIGINT it prints one line per recorded
 *   spike, "DEADLINE_NS START_NS END_NS CPU_NS GAPS_NS", to stdout and exits 0.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>

#define MAX_SPIKES 100000
/* Two clock reads of the spin are ~50 ns apart (vDSO); a longer jump is time it did not spin. */
#define GAP_NS 1000

static volatile sig_atomic_t stop;
static long long spikes[MAX_SPIKES][5];

static void on_signal(int sig) { (void)sig; stop = 1; }

static long long clock_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: %s NAME CPU fifo|other PRIORITY SPIN_US EVERY_US\n", argv[0]);
		return 2;
	}
	int cpu = atoi(argv[2]), prio = atoi(argv[4]);
	long long spin_ns = atoll(argv[5]) * 1000, every_ns = atoll(argv[6]) * 1000;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	prctl(PR_SET_NAME, argv[1], 0, 0, 0);
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set)) { perror("sched_setaffinity"); return 1; }
	mlockall(MCL_CURRENT | MCL_FUTURE); /* its own page faults would blur the known answer */
	memset(spikes, 0, sizeof spikes);
	if (strcmp(argv[3], "fifo") == 0) {
		struct sched_param sp = { .sched_priority = prio };
		if (sched_setscheduler(0, SCHED_FIFO, &sp)) { perror("sched_setscheduler"); return 1; }
	}
	fprintf(stderr, "ready\n");
	fflush(stderr);
	int n = 0;
	if (spin_ns == 0) {
		while (!stop)
			;
	} else {
		long long next = now_ns() + every_ns;
		/* A spike's CPU time runs from the previous spike's read (before that sleep) to this one's:
		 * its whole wake-up path counts (the switch to it, the return from clock_nanosleep), which
		 * a VM can stretch, and no extra call stands between the spin and the sleep. */
		long long cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		while (!stop && n < MAX_SPIKES) {
			struct timespec ts = { .tv_sec = next / 1000000000LL, .tv_nsec = next % 1000000000LL };
			if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
				continue; /* a signal: the loop condition sees stop */
			long long start = now_ns(), end = start, prev = start, gaps = 0;
			while (end - start < spin_ns) {
				end = now_ns();
				if (end - prev > GAP_NS)
					gaps += end - prev;
				prev = end;
			}
			long long cpu_now = clock_ns(CLOCK_THREAD_CPUTIME_ID);
			spikes[n][0] = next;
			spikes[n][1] = start;
			spikes[n][2] = end;
			spikes[n][3] = cpu_now - cpu;
			spikes[n][4] = gaps;
			cpu = cpu_now;
			n++;
			next += every_ns;
		}
	}
	for (int i = 0; i < n; i++)
		printf("%lld %lld %lld %lld %lld\n", spikes[i][0], spikes[i][1], spikes[i][2], spikes[i][3],
		       spikes[i][4]);
	return 0;
}
