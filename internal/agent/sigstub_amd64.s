#include "textflag.h"

// sigNop is a C-ABI signal handler that returns at once. It runs on the
// alternate signal stack every Go thread has (SA_ONSTACK), and touches
// nothing.
TEXT ·sigNop(SB),NOSPLIT|NOFRAME,$0-0
	RET

// sigReturn is the restorer x86-64 requires with SA_RESTORER.
TEXT ·sigReturn(SB),NOSPLIT|NOFRAME,$0-0
	MOVQ	$15, AX // rt_sigreturn
	SYSCALL
	INT	$3

// func sigStubs() (handler, restorer uintptr)
TEXT ·sigStubs(SB),NOSPLIT,$0-16
	LEAQ	·sigNop(SB), AX
	MOVQ	AX, handler+0(FP)
	LEAQ	·sigReturn(SB), AX
	MOVQ	AX, restorer+8(FP)
	RET
