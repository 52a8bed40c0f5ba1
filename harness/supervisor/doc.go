// Package supervisor starts a target's components as real OS processes and
// makes sure none of them outlives the harness.
//
// Each process runs in its own process group (Setpgid), so a Kill, Pause or
// Resume reaches the whole group: the component and any helper it forked.
// stdout and stderr go to LogDir/<name>.log, appended across restarts with a
// marker line per start. A process that exits by itself is reported (Exited,
// ExitStatus), never restarted behind the nemesis's back; when it exits, what
// is left of its group is SIGKILLed so that a restart finds its port free.
//
// # What is guaranteed to die with the harness
//
// Three layers, from the most to the least cooperative exit:
//
//  1. Normal exit, error return, Ctrl-C: the harness calls KillAll (defer
//     it). NotifyContext is the one signal handler: a first SIGINT/SIGTERM
//     cancels the run's context, so the run undoes its faults, kills its
//     processes and still writes its report; a second one runs the abort
//     hooks (OnAbort: the harness registers KillAll and the environment's
//     teardown) and exits at once. A panic runs the deferred KillAll too.
//  2. Anything else (SIGKILL of the harness, a panic in another goroutine,
//     os.Exit, an OOM kill): every direct child was started with Pdeathsig
//     SIGKILL, from one OS thread that is locked for the life of the
//     process (Pdeathsig fires when the *thread* that forked exits, not the
//     process, so an ordinary goroutine would not do). Pdeathsig does not
//     reach grandchildren, so the supervisor also runs one watchdog, a
//     /bin/sh process in its own group that is told the pgid of every live
//     child on its stdin; when the harness dies the kernel closes that pipe,
//     and the watchdog SIGKILLs every group it still knows, then exits.
//
// Not covered: a descendant that leaves its process group (setsid, a
// daemonising double fork) and survives the death of its parent; a
// descendant started after the harness died. Containing those needs a cgroup
// or a PID namespace, which this machine's harness does not assume. The
// watchdog itself can be killed by a broad `pkill sh`; then only Pdeathsig
// remains.
package supervisor
