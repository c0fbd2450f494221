package env

import (
	"math"
	"testing"
)

func TestNormalizeAnswer(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Denver Broncos", "denver broncos"},
		{"The Denver Broncos!", "denver broncos"},
		{"  a  quick,   brown fox. ", "quick brown fox"},
		{"An apple a day", "apple day"},
		{"theatre another", "theatre another"},
		{"Saint-Bernadette's", "saintbernadettes"},
		{"1,204", "1204"},
		{"the", ""},
		{"", ""},
		{"Ünïcode Name", "ünïcode name"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := normalizeAnswer(tt.in); got != tt.want {
				t.Errorf("normalizeAnswer(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// Cases follow the official SQuAD evaluation script's arithmetic.
func TestExactMatchAndF1(t *testing.T) {
	tests := []struct {
		name       string
		pred, gold string
		em, f1     float64
	}{
		{"identical", "Denver Broncos", "Denver Broncos", 1, 1},
		{"article and case", "the denver broncos", "Denver Broncos", 1, 1},
		{"punctuation", "Denver Broncos.", "Denver Broncos", 1, 1},
		{"partial recall", "Broncos", "Denver Broncos", 0, 2.0 / 3},
		{"partial precision", "Denver Broncos team", "Denver Broncos", 0, 0.8},
		{"overlap", "Saint Bernadette Soubirous", "Bernadette Soubirous", 0, 0.8},
		{"disjoint", "Carolina Panthers", "Denver Broncos", 0, 0},
		{"repeated tokens count once each", "the the cat cat", "cat", 0, 2.0 / 3},
		{"empty prediction", "", "Denver Broncos", 0, 0},
		{"both empty", "", "the", 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exactMatch(tt.pred, tt.gold); got != tt.em {
				t.Errorf("exactMatch(%q, %q) = %v, want %v", tt.pred, tt.gold, got, tt.em)
			}
			if got := tokenF1(tt.pred, tt.gold); math.Abs(got-tt.f1) > 1e-9 {
				t.Errorf("tokenF1(%q, %q) = %v, want %v", tt.pred, tt.gold, got, tt.f1)
			}
		})
	}
}

func TestScoreAnswers(t *testing.T) {
	qs := []Question{
		{Text: "What is the capital of Veloria?", Answers: []string{"Marnth"}},
		{Text: "What is the highest peak of Ostrel?", Answers: []string{"Mount Kerrow", "Kerrow"}},
	}
	tests := []struct {
		name    string
		answers []string
		want    Score
	}{
		{"all right", []string{"marnth", "Kerrow"}, Score{Success: true, EM: 1, F1: 1, PerQuestion: []QuestionScore{{"marnth", 1, 1}, {"Kerrow", 1, 1}}}},
		// "Kerrow peak" scores F1 1/2 against "Mount Kerrow" and 2/3 against "Kerrow".
		{"best gold answer counts", []string{"Marnth", "the Kerrow peak"}, Score{EM: 0.5, F1: (1 + 2.0/3) / 2, PerQuestion: []QuestionScore{{"Marnth", 1, 1}, {"the Kerrow peak", 0, 2.0 / 3}}}},
		{"missing answers are empty", []string{"Marnth"}, Score{EM: 0.5, F1: 0.5, PerQuestion: []QuestionScore{{"Marnth", 1, 1}, {"", 0, 0}}}},
		{"extra answers are ignored", []string{"Marnth", "Kerrow", "x"}, Score{Success: true, EM: 1, F1: 1, PerQuestion: []QuestionScore{{"Marnth", 1, 1}, {"Kerrow", 1, 1}}}},
		{"nothing", nil, Score{PerQuestion: []QuestionScore{{}, {}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := scoreAnswers(qs, tt.answers)
			if got.Success != tt.want.Success || math.Abs(got.EM-tt.want.EM) > 1e-9 || math.Abs(got.F1-tt.want.F1) > 1e-9 {
				t.Errorf("score = %+v, want %+v", got, tt.want)
			}
			for i, pq := range got.PerQuestion {
				w := tt.want.PerQuestion[i]
				if pq.Answer != w.Answer || pq.EM != w.EM || math.Abs(pq.F1-w.F1) > 1e-9 {
					t.Errorf("question %d: %+v, want %+v", i+1, pq, w)
				}
			}
		})
	}
}
