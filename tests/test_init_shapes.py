"""`init` on competitions of shapes it was never shown, each built here as a tiny table of its
real columns: a binary target whose sample submission holds probabilities (scored by ROC AUC),
each row judged against a repeated rule with worked examples beside it and rules at test time
that training never had (Jigsaw's Agile Community Rules, 2025); answers that join two training
columns, three per row (MAP - Charting Student Math Misunderstandings, 2025). Through training,
prediction and the offline kernel in tests/test_kernel_shapes.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import CATEGORIES, RULES, distinct_texts, map_folder, real_dir, rules_folder, tiny_data

from utils.competition import Competition, CompetitionError, load_competition
from utils.data import DataError
from utils.infer import infer, label_join, sample_values
from utils.infer import main as init_main
from utils.tables import competition_folds, read_table

# ----------------------------------------------------------------------------- the sample's values


def test_a_sample_of_probabilities_gives_roc_auc_and_one_of_labels_keeps_f1(tmp_path):
    data = rules_folder(tmp_path / "rules")
    comp, why = infer(data)
    assert comp.task == "binary" and comp.metric_name == "roc_auc" and comp.submission_kind == "probabilities"
    assert any("holds probabilities" in w and "roc_auc" in w for w in why)
    # The same competition with a sample of 0/1 labels: a thresholded metric, F1 for binary.
    pd.read_csv(data / "sample_submission.csv").assign(rule_violation=0).to_csv(data / "sample_submission.csv",
                                                                                index=False)
    comp, why = infer(data)
    assert comp.metric_name == "f1" and comp.submission_kind == "labels"
    assert any("holds labels" in w for w in why)


def test_sample_values_reads_fractions_whole_numbers_and_words():
    assert sample_values(pd.DataFrame({"y": [0.5, 0.5]}), ("y",)) == "probabilities"
    assert sample_values(pd.DataFrame({"y": [0, 1]}), ("y",)) == "labels"
    assert sample_values(pd.DataFrame({"y": ["cat", "dog"]}), ("y",)) == "labels"
    assert sample_values(pd.DataFrame({"y": [2.0, 3.0]}), ("y",)) == "labels"
    assert sample_values(pd.DataFrame({"y": [np.nan, np.nan]}), ("y",)) == ""


def test_the_real_binary_competition_keeps_its_labels_and_f1(tmp_path):
    comp, why = infer(real_dir("nlp-getting-started"))
    assert comp.metric_name == "f1" and comp.submission_kind == "labels" and comp.text_cols == ("text",)


# ----------------------------------------------------------------------------- a row's condition


def test_a_repeated_rule_becomes_the_condition_and_unseen_rules_group_the_folds(tmp_path):
    data = rules_folder(tmp_path / "rules")
    comp, why = infer(data)
    assert comp.text_cols == ("rule", "body")  # the text judged last: truncation cuts it, not the rule
    assert comp.folds == "group" and comp.group_col == "rule"
    said = "\n".join(why)
    assert "condition 'rule'" in said and "2 of its values in test.csv are none of training's 6" in said
    # the worked examples are named, with a proposal; the one-word tag is not the condition
    assert "positive_example_1, positive_example_2, negative_example_1, negative_example_2" in said
    assert "text_template" in said and "extra labelled rows" in said
    train = read_table(comp, data)
    folds = competition_folds(comp, train)
    assert (pd.Series(folds).groupby(train["rule"].to_numpy()).nunique() == 1).all()  # no rule in two folds
    texts = comp.input_texts(train)
    assert texts[0] == (train.rule[0], train.body[0])


def test_rules_all_seen_in_training_leave_the_folds_stratified_and_say_so(tmp_path):
    comp, why = infer(rules_folder(tmp_path / "rules", unseen=False))
    assert comp.text_cols == ("rule", "body") and comp.folds == "stratified" and not comp.group_col
    assert any("every value of it in test.csv is one training has" in w for w in why)


def test_fewer_conditions_than_folds_say_how_many_folds_to_train(tmp_path):
    data = rules_folder(tmp_path / "rules")
    train = pd.read_csv(data / "train.csv")
    train.assign(rule=[RULES[i % 3] for i in range(len(train))]).to_csv(data / "train.csv", index=False)
    comp, why = infer(data)
    assert comp.group_col == "rule" and any("train with --folds 3" in w for w in why)
    with pytest.raises(DataError, match="use --folds 3 or fewer"):
        competition_folds(comp, read_table(comp, data))
    assert len(set(competition_folds(comp, read_table(comp, data), n_folds=3))) == 3


def test_a_one_word_tag_is_not_a_condition(tmp_path):
    data = rules_folder(tmp_path / "rules")
    for f in ("train.csv", "test.csv"):
        pd.read_csv(data / f).drop(columns="rule").to_csv(data / f, index=False)
    comp, why = infer(data)
    assert comp.text_cols == ("body",) and comp.group_col != "subreddit"
    assert any("not used: subreddit" in w for w in why)


# ----------------------------------------------------------------------------- joined answers


def test_answers_joined_from_two_columns_are_a_classification_answered_top_3(tmp_path):
    data = map_folder(tmp_path / "map")
    comp, why = infer(data)
    assert comp.task == "multiclass" and comp.ranking and comp.answer_k == 3 and comp.metric_name == "map@3"
    assert comp.target_cols == ("Category:Misconception",)
    assert comp.label_template == "{Category}:{Misconception}" and comp.label_missing == "NA"
    assert comp.text_cols == ("QuestionText", "StudentExplanation")  # the question is the condition
    assert comp.folds == "stratified"  # test's questions are training's
    said = "\n".join(why)
    assert "joined by ':'" in said and "a missing 'Misconception' written 'NA'" in said
    train = read_table(comp, data)  # the kit's read keeps the file's "NA" as written, and joins it
    labels = set(train["Category:Misconception"])
    sample = pd.read_csv(data / "sample_submission.csv")
    assert set(sample.iloc[0, 1].split()) <= labels
    assert "False_Misconception:Adding_across" in labels and "True_Correct:NA" in labels
    assert load_competition(str(_saved(comp, tmp_path))) == comp  # round-trips JSON


def _saved(comp: Competition, tmp: Path) -> Path:
    comp.save(tmp / "c.json")
    return tmp / "c.json"


def test_a_blank_part_is_written_as_the_competition_writes_it(tmp_path):
    data = map_folder(tmp_path / "map")
    train = pd.read_csv(data / "train.csv", keep_default_na=False)
    train.assign(Misconception=train.Misconception.replace("NA", "")).to_csv(data / "train.csv", index=False)
    comp, _ = infer(data)
    assert comp.label_missing == "NA"
    assert "True_Correct:NA" in set(read_table(comp, data)["Category:Misconception"])


def test_a_join_is_found_by_values_when_the_answer_column_does_not_name_it(tmp_path):
    tr = pd.DataFrame({"a": ["x", "y", "z"] * 4, "b": ["p", None, "q"] * 4, "text": "t"})
    found = label_join(tr, "answer", pd.Series(["x|p y|none", "z|q x|p"]))
    assert found[:2] == ("{a}|{b}", "none")
    assert label_join(tr, "answer", pd.Series(["x|p w|q"])) is None  # w is nobody's value


def test_a_joined_label_with_a_space_is_refused_in_one_line(tmp_path):
    data = map_folder(tmp_path / "map")
    comp, _ = infer(data)
    train = pd.read_csv(data / "train.csv", keep_default_na=False)
    train.loc[5, "Misconception"] = "Adding across"
    train.to_csv(data / "train.csv", index=False)
    with pytest.raises(DataError) as e:
        read_table(comp, data)
    assert "'True_Neither:Adding across' holds a space" in str(e.value) and "(id 5)" in str(e.value)


@pytest.mark.parametrize("fields, message", [
    ({"label_template": "{a}:{b}", "task": "regression"}, "a joined label is one class label"),
    ({"label_template": "no columns", "task": "multiclass"}, "must name the training columns"),
    ({"label_template": "{target}:{b}", "task": "multiclass"}, "is what the template writes"),
    ({"label_missing": "NA", "task": "multiclass"}, "it needs the label_template"),
])
def test_a_broken_label_template_is_one_line(fields, message):
    with pytest.raises(CompetitionError) as e:
        Competition(slug="x", **fields)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_init_on_the_joined_shape_writes_a_description_the_cli_reads(tmp_path, capsys):
    data = map_folder(tmp_path / "map")
    assert init_main(["--data", str(data), "--out", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert "label_template '{Category}:{Misconception}'" in out and "map@3" in out
    assert load_competition(str(tmp_path / "c.json")).label_template == "{Category}:{Misconception}"


def test_a_joined_prompt_question_is_the_condition_not_the_article_it_is_about(tmp_path):
    # Student Summaries' shape with texts of its lengths: the prompt's question, title and article
    # join onto each summary; the question (the shortest sentence) conditions it, the test's
    # prompts are new, so folds group by it.
    data = tiny_data("commonlit-evaluate-student-summaries", tmp_path / "ess", 60)
    rng = np.random.default_rng(1)
    train = pd.read_csv(data / "summaries_train.csv")
    train.assign(prompt_id=[f"p{i % 6}" for i in range(60)], text=distinct_texts(rng, 60, 40)).to_csv(
        data / "summaries_train.csv", index=False)
    prompts = lambda ids: pd.DataFrame({"prompt_id": ids,  # noqa: E731
                                        "prompt_question": [f"Summarize how the experiment {i} ended, and why."
                                                            for i in ids],
                                        "prompt_title": "The Third Wave",
                                        "prompt_text": distinct_texts(rng, len(ids), 300)})
    prompts([f"p{i}" for i in range(6)]).to_csv(data / "prompts_train.csv", index=False)
    prompts(["abc123"]).to_csv(data / "prompts_test.csv", index=False)
    comp, why = infer(data)
    assert comp.text_cols == ("prompt_question", "text") and comp.group_col == "prompt_question"
    assert comp.train_joins == (("prompts_train.csv", "prompt_id"),)


# ----------------------------------------------------------------------------- the bar


def test_the_most_frequent_answers_per_question_are_a_bar_counted_on_the_other_folds(tmp_path):
    from utils import eda

    data = map_folder(tmp_path / "map")
    train = pd.read_csv(data / "train.csv", keep_default_na=False)
    # each question's students mostly give one answer: the question alone predicts it
    question = train.QuestionId - train.QuestionId.min()
    train["Category"] = np.where(np.arange(len(train)) % 8 == 0, "True_Neither", np.array(CATEGORIES)[question])
    train["Misconception"] = np.where(train.Category == "False_Misconception", "Incomplete", "NA")
    train.to_csv(data / "train.csv", index=False)
    comp, _ = infer(data)
    df = read_table(comp, data)
    folds = competition_folds(comp, df)
    scores = eda.answer_baselines(comp, df, folds)
    per = scores["most frequent answers per 'QuestionText'"]
    assert per > scores["most frequent answers first"] and per > 0.9
    assert eda.bar(scores, comp.metric_name)[0] == "most frequent answers per 'QuestionText'"
    # counted on the other folds only: a question whose rows are all in one fold is ranked by the
    # overall counts there, so its rows score as they do under the overall baseline
    alone = df.assign(QuestionText=np.where(folds == 0, "a question only fold 0 has", df.QuestionText))
    rows = folds == 0
    assert eda.answer_baselines(comp, alone, folds, rows)["most frequent answers per 'QuestionText'"] == \
        pytest.approx(eda.answer_baselines(comp, alone, folds, rows)["most frequent answers first"])
    # the EDA notebook's ranking path reads them too
    assert set(scores) <= set(eda.ranking_baselines(comp, df, folds))


def test_a_run_prints_its_cv_beside_the_bar_on_its_own_finished_folds(tmp_path, tiny_bert, capsys):
    from helpers import cfg_for, init

    from utils.train import run_cv

    data = map_folder(tmp_path / "map")
    desc = init(data)
    metrics = run_cv(cfg_for(data / "train.csv", tmp_path / "run", tiny_bert, competition=desc, max_steps=1,
                             max_len=16, only_folds=(0,)))
    out = capsys.readouterr().out
    from utils import eda

    comp = load_competition(desc)
    df = read_table(comp, data)
    folds = competition_folds(comp, df)
    want = eda.answer_baselines(comp, df, folds, folds == 0)
    name, best = eda.bar(want, comp.metric_name)
    assert f"cv map@3 {metrics['cv']:.4f} beside the bar that reads no text (same folds): {name} {best:.4f}" in out


def test_a_list_of_one_columns_labels_is_that_classification_answered_top_k(tmp_path):
    # The sample lists three of a training column's labels per row, under a name of its own.
    data = map_folder(tmp_path / "map")
    sample = pd.read_csv(data / "sample_submission.csv")
    pd.DataFrame({"row_id": sample.row_id, "predicted": "True_Correct False_Neither True_Neither"}).to_csv(
        data / "sample_submission.csv", index=False)
    comp, why = infer(data)
    assert comp.target_cols == ("Category",) and comp.task == "multiclass" and comp.answer_k == 3
    assert comp.answer_column == "predicted" and comp.metric_name == "map@3" and not comp.label_template
    assert any("'predicted' writes are its values" in w for w in why)
