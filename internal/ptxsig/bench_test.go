package ptxsig

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"testing"
)

// BenchmarkParse reads images of 64 KiB, 1 MiB and 16 MiB: clang's PTX of
// testdata/kernels.cu repeated (its kernels renamed each time), and the
// hostile image of issue 58 (.entry repeated inside one comment). MB/s
// is the time per byte: linear reading keeps it flat across sizes.
func BenchmarkParse(b *testing.B) {
	clang, err := os.ReadFile("testdata/clang.ptx")
	if err != nil {
		b.Fatal(err)
	}
	for _, kind := range []string{"compiler", "hostile"} {
		for _, size := range []int{64 << 10, 1 << 20, 16 << 20} {
			var img []byte
			if kind == "compiler" {
				img = repeated(clang, size)
			} else {
				img = hostile(size)
			}
			b.Run(fmt.Sprintf("%s/%dKiB", kind, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(img)))
				for b.Loop() {
					if _, _, err := Parse(img); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
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
