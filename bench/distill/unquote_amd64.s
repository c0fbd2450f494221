#include "textflag.h"

// func copyRunAVX2(b, src []byte, r, w int) (int, int)
TEXT ·copyRunAVX2(SB), NOSPLIT, $0-80
	MOVQ b_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	MOVQ r+48(FP), AX
	MOVQ w+56(FP), BX
	ADDQ BX, DI          // DI = &b[w]
	SUBQ AX, DI          // DI + AX = &b[w] for the r at entry
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
	ADDQ     $32, AX
	JMP      loop

found:
	BSFL DX, DX
	ADDQ DX, AX

done:
	VZEROUPPER
	// w moves as far as r did.
	SUBQ r+48(FP), BX
	ADDQ AX, BX
	MOVQ AX, ret+64(FP)
	MOVQ BX, ret1+72(FP)
	RET
