package ptxsig

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"syscall"
	"testing"
)

// BenchmarkParse reads images of 64 KiB, 1 MiB and 16 MiB: clang's PTX of
// testdata/kernels.cu repeated (its kernels renamed in each copy), and the
// hostile image of issue 58 (.entry repeated inside one comment). MB/s is
// the time per byte, which linear reading keeps flat across sizes.
//
// warm reads one image again and again, so a small one is read from the
// CPU's caches while 16 MiB comes from memory; cold reads each time the
// next of copies filling 64 MiB, so that every size comes from memory and
// the sizes compare the reading alone.
func BenchmarkParse(b *testing.B) {
	clang, err := os.ReadFile("testdata/clang.ptx")
	if err != nil {
		b.Fatal(err)
	}
	for _, kind := range []string{"compiler", "hostile"} {
		for _, cache := range []string{"warm", "cold"} {
			for _, size := range []int{64 << 10, 1 << 20, 16 << 20} {
				b.Run(fmt.Sprintf("%s/%s/%dKiB", kind, cache, size>>10), func(b *testing.B) {
					copies := 1
					if cache == "cold" {
						copies = max(1, 64<<20/size)
					}
					imgs := make([][]byte, copies)
					for i := range imgs {
						if kind == "compiler" {
							imgs[i] = repeated(clang, size)
						} else {
							imgs[i] = hostile(size)
						}
					}
					b.SetBytes(int64(len(imgs[0])))
					i, cpu := 0, cpuTime()
					for b.Loop() {
						if _, _, err := Parse(imgs[i]); err != nil {
							b.Fatal(err)
						}
						i = (i + 1) % len(imgs)
					}
					// The process's CPU time (the garbage collector's
					// included) per byte: unlike the wall time, not
					// lengthened by other processes on a shared host.
					b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/float64(len(imgs[0])), "cpu-ns/B")
				})
			}
		}
	}
}

// cpuTime is the process's user and system CPU time so far, in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

var entryName = regexp.MustCompile(`\.entry (\w+)`)

// repeated is image's header, then its body repeated to about size bytes
// with each copy's kernels renamed.
func repeated(image []byte, size int) []byte {
	at := bytes.Index(image, []byte(".address_size 64\n")) + len(".address_size 64\n")
	var b bytes.Buffer
	b.Write(image[:at])
	for i := 0; b.Len() < size; i++ {
		b.Write(entryName.ReplaceAll(image[at:], []byte(fmt.Sprintf(".entry ${1}_%d", i))))
	}
	return b.Bytes()
}
