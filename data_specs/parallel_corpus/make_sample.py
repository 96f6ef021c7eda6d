"""Generate the bundled English/French/German sample (parallel, monolingual, classification).

Every sentence is built from a small hand-written phrase table (written for this project,
public domain / CC0): a subject, a verb, an object and a time phrase, or a subject with an
adjective. Each slot is translated by hand, with German case endings (nominative subject,
accusative object, verb-second word order) and French gender agreement handled in the
table, so the three sides are true translations of each other. Combinations are drawn with
a fixed seed, so running this script again rewrites byte-identical files:

    python data_specs/parallel_corpus/make_sample.py

Outputs (paths relative to data_specs/):
    parallel_corpus/sample/en-fr.tsv             TSV: English <TAB> French
    parallel_corpus/sample/en-de.tsv             TSV: English <TAB> German
    parallel_corpus/sample/de-fr.de, de-fr.fr    two aligned files (German, French)
    parallel_corpus/heldout/en-fr.tsv, en-de.tsv pairs never used for training (retrieval)
    monolingual_corpus/sample/{en,fr,de}.txt     one sentence per line, sizes 600/300/150
    monolingual_corpus/classification/{en,fr,de}.tsv  label <TAB> sentence (animal/person)
"""

from __future__ import annotations

import random
from pathlib import Path

# (english, french, french gender, german nominative, german accusative, kind)
NOUNS = [
    ("the cat", "le chat", "m", "die Katze", "die Katze", "animal"),
    ("the dog", "le chien", "m", "der Hund", "den Hund", "animal"),
    ("the horse", "le cheval", "m", "das Pferd", "das Pferd", "animal"),
    ("the bird", "l'oiseau", "m", "der Vogel", "den Vogel", "animal"),
    ("the cow", "la vache", "f", "die Kuh", "die Kuh", "animal"),
    ("the mouse", "la souris", "f", "die Maus", "die Maus", "animal"),
    ("the fox", "le renard", "m", "der Fuchs", "den Fuchs", "animal"),
    ("the man", "l'homme", "m", "der Mann", "den Mann", "person"),
    ("the woman", "la femme", "f", "die Frau", "die Frau", "person"),
    ("the child", "l'enfant", "m", "das Kind", "das Kind", "person"),
    ("the teacher", "le professeur", "m", "der Lehrer", "den Lehrer", "person"),
    ("the farmer", "le fermier", "m", "der Bauer", "den Bauern", "person"),
    ("the doctor", "le médecin", "m", "der Arzt", "den Arzt", "person"),
    ("the girl", "la fille", "f", "das Mädchen", "das Mädchen", "person"),
    ("the boy", "le garçon", "m", "der Junge", "den Jungen", "person"),
]
# Verbs taking an accusative object in German: (english, french, german).
VERBS = [
    ("sees", "voit", "sieht"),
    ("likes", "aime", "mag"),
    ("finds", "trouve", "findet"),
    ("calls", "appelle", "ruft"),
    ("watches", "regarde", "beobachtet"),
    ("draws", "dessine", "zeichnet"),
    ("waits for", "attend", "erwartet"),
    ("hears", "entend", "hört"),
]
TIMES = [
    ("", "", ""),
    ("today", "aujourd'hui", "heute"),
    ("in the morning", "le matin", "am Morgen"),
    ("every day", "chaque jour", "jeden Tag"),
    ("in the evening", "le soir", "am Abend"),
    ("again", "encore", "wieder"),
]
# (english, french masculine, french feminine, german)
ADJECTIVES = [
    ("big", "grand", "grande", "groß"),
    ("small", "petit", "petite", "klein"),
    ("old", "vieux", "vieille", "alt"),
    ("young", "jeune", "jeune", "jung"),
    ("happy", "content", "contente", "glücklich"),
    ("tired", "fatigué", "fatiguée", "müde"),
    ("hungry", "affamé", "affamée", "hungrig"),
    ("calm", "calme", "calme", "ruhig"),
]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def action(subject: int, verb: int, obj: int, time: int) -> tuple[str, str, str, str]:
    """One action sentence in (en, fr, de) plus the subject's kind."""
    s, v, o, t = NOUNS[subject], VERBS[verb], NOUNS[obj], TIMES[time]
    en = " ".join(w for w in (s[0], v[0], o[0], t[0]) if w)
    fr = " ".join(w for w in (s[1], v[1], o[1], t[1]) if w)
    # German verb-second: subject, verb, time phrase, object.
    de = " ".join(w for w in (s[3], v[2], t[2], o[4]) if w)
    return _cap(en) + ".", _cap(fr) + ".", _cap(de) + ".", s[5]


def description(subject: int, adjective: int) -> tuple[str, str, str, str]:
    """One 'X is ADJ' sentence in (en, fr, de) plus the subject's kind."""
    s, a = NOUNS[subject], ADJECTIVES[adjective]
    fr_adj = a[1] if s[2] == "m" else a[2]
    return (
        f"{_cap(s[0])} is {a[0]}.",
        f"{_cap(s[1])} est {fr_adj}.",
        f"{_cap(s[3])} ist {a[3]}.",
        s[5],
    )


def all_sentences() -> list[tuple[str, str, str, str]]:
    out = [
        action(s, v, o, t)
        for s in range(len(NOUNS))
        for v in range(len(VERBS))
        for o in range(len(NOUNS))
        for t in range(len(TIMES))
        if s != o
    ]
    out += [description(s, a) for s in range(len(NOUNS)) for a in range(len(ADJECTIVES))]
    return out


def main() -> None:
    root = Path(__file__).resolve().parent.parent
    rng = random.Random(20261121)
    pool = all_sentences()
    rng.shuffle(pool)
    # Disjoint slices: parallel train, held-out parallel, monolingual, classification.
    train, heldout, rest = pool[:480], pool[480:580], pool[580:]
    par = root / "parallel_corpus" / "sample"
    held = root / "parallel_corpus" / "heldout"
    mono = root / "monolingual_corpus" / "sample"
    cls = root / "monolingual_corpus" / "classification"
    for d in (par, held, mono, cls):
        d.mkdir(parents=True, exist_ok=True)

    def write(path: Path, lines: list[str]) -> None:
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")

    write(par / "en-fr.tsv", [f"{en}\t{fr}" for en, fr, _, _ in train[:200]])
    write(par / "en-de.tsv", [f"{en}\t{de}" for en, _, de, _ in train[200:360]])
    write(par / "de-fr.de", [de for _, _, de, _ in train[360:480]])
    write(par / "de-fr.fr", [fr for _, fr, _, _ in train[360:480]])
    write(held / "en-fr.tsv", [f"{en}\t{fr}" for en, fr, _, _ in heldout[:50]])
    write(held / "en-de.tsv", [f"{en}\t{de}" for en, _, de, _ in heldout[50:100]])
    # Low-resource languages get fewer sentences, so language smoothing matters.
    write(mono / "en.txt", [en for en, _, _, _ in rest[:600]])
    write(mono / "fr.txt", [fr for _, fr, _, _ in rest[600:900]])
    write(mono / "de.txt", [de for _, _, de, _ in rest[900:1050]])
    labelled = rest[1050:1170]
    for index, lang in enumerate(("en", "fr", "de")):
        write(cls / f"{lang}.tsv", [f"{row[3]}\t{row[index]}" for row in labelled])


if __name__ == "__main__":
    main()
