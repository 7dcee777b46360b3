package gemmjob

import "testing"

func TestBF16Constants(t *testing.T) {
	if BF16(2048) != 0x4500 || BF16(1) != BF16One || BF16(0.5) != BF16Half {
		t.Fatal("bf16 constants")
	}
}
