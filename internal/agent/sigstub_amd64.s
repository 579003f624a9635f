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

// sigFilter is a C-ABI signal handler (signal in DI, siginfo in SI, context
// in DX) in front of the Go runtime's for the signals it takes for faults.
// A signal another process sent (si_code <= 0: SI_USER, SI_QUEUE, SI_TKILL
// and the like) returns at once; a real fault (si_code > 0, set only by the
// kernel) goes on to the runtime's handler in goHandlers, with every
// register as the kernel left it.
TEXT ·sigFilter(SB),NOSPLIT|NOFRAME,$0-0
	MOVL	8(SI), AX // si_code
	CMPL	AX, $0
	JLE	drop
	MOVL	DI, AX
	CMPL	AX, $64
	JHI	drop
	LEAQ	·goHandlers(SB), R11
	MOVQ	(R11)(AX*8), R11
	TESTQ	R11, R11
	JZ	drop
	JMP	R11
drop:
	RET

// func sigFilterAddr() uintptr
TEXT ·sigFilterAddr(SB),NOSPLIT,$0-8
	LEAQ	·sigFilter(SB), AX
	MOVQ	AX, ret+0(FP)
	RET
