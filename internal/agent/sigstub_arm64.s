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

// sigFilter is a C-ABI signal handler (signal in R0, siginfo in R1, context
// in R2) in front of the Go runtime's for the signals it takes for faults.
// A signal another process sent (si_code <= 0: SI_USER, SI_QUEUE, SI_TKILL
// and the like) returns at once; a real fault (si_code > 0, set only by the
// kernel) goes on to the runtime's handler in goHandlers, with every
// argument register and the link register as the kernel left them.
TEXT ·sigFilter(SB),NOSPLIT|NOFRAME,$0-0
	MOVW	8(R1), R3 // si_code, sign-extended
	CMP	$0, R3
	BLE	drop
	MOVWU	R0, R4
	CMP	$64, R4
	BHI	drop
	MOVD	$·goHandlers(SB), R5
	MOVD	(R5)(R4<<3), R5
	CBZ	R5, drop
	JMP	(R5)
drop:
	RET

// func sigFilterAddr() uintptr
TEXT ·sigFilterAddr(SB),NOSPLIT,$0-8
	MOVD	$·sigFilter(SB), R0
	MOVD	R0, ret+0(FP)
	RET
