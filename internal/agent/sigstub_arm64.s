#include "textflag.h"

// sigNop is a C-ABI signal handler that returns at once; the kernel's vDSO
// trampoline does the sigreturn on arm64.
TEXT ·sigNop(SB),NOSPLIT|NOFRAME,$0-0
	RET

// func sigStubs() (handler, restorer uintptr)
TEXT ·sigStubs(SB),NOSPLIT,$0-16
	MOVD	$·sigNop(SB), R0
	MOVD	R0, handler+0(FP)
	MOVD	ZR, restorer+8(FP)
	RET
