package distill

import (
	"regexp"
	"strings"
	"testing"
)

// pyKeywords returns the keyword arguments of the first call of fn in src
// (a Python file): the names before "=" at the call's top level.
func pyKeywords(t *testing.T, src, fn string) []string {
	t.Helper()
	i := strings.Index(src, fn+"(")
	if i < 0 {
		t.Fatalf("no call of %s", fn)
	}
	depth, start := 0, i+len(fn)+1
	var args []string
	arg := start
	for j := start; j < len(src); j++ {
		switch src[j] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth == 0 {
				return keywords(append(args, src[arg:j]))
			}
			depth--
		case ',':
			if depth == 0 {
				args = append(args, src[arg:j])
				arg = j + 1
			}
		}
	}
	t.Fatalf("call of %s not closed", fn)
	return nil
}

var keyword = regexp.MustCompile(`^\s*(?:#[^\n]*\n\s*)*([A-Za-z_]\w*)\s*=[^=]`)

func keywords(args []string) []string {
	var out []string
	for _, a := range args {
		if m := keyword.FindStringSubmatch(a); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// make real ran the recipe with the pinned TRL, transformers and peft
// (scripts/real-model/requirements.txt); these are what they rejected or
// what it took to run. The Python run itself is make real's; this keeps
// the fixes from coming undone where make test can see them.
func TestRecipeRunsOnTodaysTrainers(t *testing.T) {
	b, err := render("train_lora.py.tmpl", recipeData{MaxLength: 10000, Seed: 42, HasValidation: true})
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	// Arguments the pinned versions removed (or deprecate: torch_dtype), and what
	// replaced them.
	removed := map[string]map[string]string{
		"SFTConfig": {
			"warmup_ratio":         "warmup_steps (a float below 1 is a share of the steps; transformers 5 removed warmup_ratio)",
			"evaluation_strategy":  "eval_strategy",
			"max_seq_length":       "max_length (TRL)",
			"overwrite_output_dir": "nothing (transformers 5)",
		},
		"SFTTrainer":                           {"tokenizer": "processing_class"},
		"AutoModelForCausalLM.from_pretrained": {"torch_dtype": "dtype"},
	}
	for fn, bad := range removed {
		args := pyKeywords(t, src, fn)
		if len(args) == 0 {
			t.Errorf("%s: no keyword arguments found", fn)
		}
		for _, a := range args {
			if use, ok := bad[a]; ok {
				t.Errorf("%s(%s=...): removed or deprecated in the pinned version; use %s", fn, a, use)
			}
		}
	}
	cfg := strings.Join(pyKeywords(t, src, "SFTConfig"), " ")
	for _, want := range []string{"warmup_steps", "completion_only_loss", "max_length", "weight_decay", "learning_rate"} {
		if !strings.Contains(" "+cfg+" ", " "+want+" ") {
			t.Errorf("SFTConfig lacks %s: %s", want, cfg)
		}
	}
	if !strings.Contains(src, "warmup_steps=0.05,") {
		t.Error("warmup is not the paper's 5% of the steps")
	}
	// A model loaded from a GGUF file is de-quantized but still marked
	// quantized, and Trainer refuses to train it: the recipe drops the mark
	// before SFTTrainer sees the model.
	gguf := regexp.MustCompile(`(?s)if args\.gguf_file[^\n]*:\n(\s+[^\n]*\n)*?\s+model\.hf_quantizer\.remove_quantization_config\(model\)\n\s+model\.config\._is_quantized = False\n`)
	loc := gguf.FindStringIndex(src)
	if loc == nil {
		t.Fatal("the recipe does not drop the quantized mark of a GGUF-loaded model")
	}
	if trainer := strings.Index(src, "SFTTrainer("); trainer < loc[1] {
		t.Error("the quantized mark is dropped after SFTTrainer is built")
	}
}
