#include "textflag.h"

// func copyRunAVX2(b, src []byte, r, w int) (int, int)
TEXT ·copyRunAVX2(SB), NOSPLIT, $0-80
	MOVQ b_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	MOVQ r+48(FP), AX
	MOVQ w+56(FP), BX
	MOVQ $0x5c, DX
	MOVQ DX, X0
	VPBROADCASTB X0, Y0 // backslashes
	MOVQ $0x22, DX
	MOVQ DX, X1
	VPBROADCASTB X1, Y1 // quotes

loop:
	// A block of src[r:] to b[w:] while 32 bytes are left (w <= r, so b
	// has room); bytes past a quote or backslash are overwritten later.
	LEAQ      32(AX), DX
	CMPQ      DX, CX
	JA        done
	VMOVDQU   (SI)(AX*1), Y2
	VMOVDQU   Y2, (DI)(BX*1)
	VPCMPEQB  Y0, Y2, Y3
	VPCMPEQB  Y1, Y2, Y4
	VPOR      Y3, Y4, Y3
	VPMOVMSKB Y3, DX
	TESTL     DX, DX
	JNZ       found
	ADDQ      $32, AX
	ADDQ      $32, BX
	JMP       loop

found:
	BSFL    DX, DX
	ADDQ    DX, AX
	ADDQ    DX, BX
	MOVBLZX (SI)(AX*1), DX
	CMPB    DX, $0x5c
	JNE     done              // a quote: the string's end
	LEAQ    1(AX), DX
	CMPQ    DX, CX
	JAE     done              // the escape is cut: unquote reports it
	MOVBLZX 1(SI)(AX*1), DX
	CMPB    DX, $0x6e         // \n
	JEQ     newline
	CMPB    DX, $0x22         // \"
	JEQ     literal
	CMPB    DX, $0x5c         // \\
	JEQ     literal
	JMP     done              // other escapes are unquote's

newline:
	MOVQ $0x0a, DX

literal:
	MOVB DX, (DI)(BX*1)
	ADDQ $2, AX
	INCQ BX
	JMP  loop

done:
	VZEROUPPER
	MOVQ AX, ret+64(FP)
	MOVQ BX, ret1+72(FP)
	RET
