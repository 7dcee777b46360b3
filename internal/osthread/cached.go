//go:build cgo && linux

package osthread

/*
#include <unistd.h>
#include <sys/syscall.h>

// A thread's id never changes, and each thread has its own copy of this
// variable (zero at its start): the system call is made once per thread.
static __thread int fcsp_tid;

static int fcsp_thread_id(void) {
	if (!fcsp_tid) fcsp_tid = (int)syscall(SYS_gettid);
	return fcsp_tid;
}
#cgo noescape fcsp_thread_id
#cgo nocallback fcsp_thread_id
*/
import "C"

func id() int { return int(C.fcsp_thread_id()) }
