package env

import "strings"

// SQuAD answer scoring (the official evaluation script's normalize_answer,
// exact match and token F1).

// normalizeAnswer lower-cases s, removes ASCII punctuation and the articles
// a, an and the, and collapses whitespace.
func normalizeAnswer(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 128 && strings.ContainsRune("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", r) {
			return -1
		}
		return r
	}, strings.ToLower(s))
	toks := strings.Fields(s)
	out := toks[:0]
	for _, t := range toks {
		if t != "a" && t != "an" && t != "the" {
			out = append(out, t)
		}
	}
	return strings.Join(out, " ")
}

func exactMatch(pred, gold string) float64 {
	if normalizeAnswer(pred) == normalizeAnswer(gold) {
		return 1
	}
	return 0
}

// tokenF1 is the harmonic mean of token precision and recall over the
// normalized answers; an empty side scores 1 only if both are empty.
func tokenF1(pred, gold string) float64 {
	p := strings.Fields(normalizeAnswer(pred))
	g := strings.Fields(normalizeAnswer(gold))
	if len(p) == 0 || len(g) == 0 {
		if len(p) == len(g) {
			return 1
		}
		return 0
	}
	counts := make(map[string]int, len(g))
	for _, t := range g {
		counts[t]++
	}
	same := 0
	for _, t := range p {
		if counts[t] > 0 {
			counts[t]--
			same++
		}
	}
	if same == 0 {
		return 0
	}
	precision := float64(same) / float64(len(p))
	recall := float64(same) / float64(len(g))
	return 2 * precision * recall / (precision + recall)
}

// scoreAnswers scores answers against the questions in order: EM and F1 of
// each are the best over its gold answers; missing answers count as empty.
// Success needs every question right.
func scoreAnswers(questions []Question, answers []string) Score {
	s := Score{Success: len(questions) > 0, PerQuestion: make([]QuestionScore, len(questions))}
	for i, q := range questions {
		var qs QuestionScore
		if i < len(answers) {
			qs.Answer = answers[i]
		}
		for _, g := range q.Answers {
			qs.EM = max(qs.EM, exactMatch(qs.Answer, g))
			qs.F1 = max(qs.F1, tokenF1(qs.Answer, g))
		}
		s.PerQuestion[i] = qs
		s.EM += qs.EM
		s.F1 += qs.F1
		s.Success = s.Success && qs.EM == 1
	}
	if len(questions) > 0 {
		s.EM /= float64(len(questions))
		s.F1 /= float64(len(questions))
	}
	return s
}
