#include "textflag.h"

// func copyRunAVX2(dst, src *byte, n int) int
TEXT ·copyRunAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
	MOVQ $0x5c, DX
	MOVQ DX, X0
	VPBROADCASTB X0, Y0
	MOVQ $0x22, DX
	MOVQ DX, X1
	VPBROADCASTB X1, Y1

loop:
	LEAQ 32(AX), DX
	CMPQ DX, CX
	JA   done
	VMOVDQU (SI)(AX*1), Y2
	VMOVDQU Y2, (DI)(AX*1)
	VPCMPEQB Y0, Y2, Y3
	VPCMPEQB Y1, Y2, Y4
	VPOR     Y3, Y4, Y3
	VPMOVMSKB Y3, DX
	TESTL    DX, DX
	JNZ      found
	MOVQ     $32, DX
	ADDQ     DX, AX
	JMP      loop

found:
	BSFL DX, DX
	ADDQ DX, AX

done:
	VZEROUPPER
	MOVQ AX, ret+24(FP)
	RET
