"""Regenerate the K-BERT sample (CC0): ``python data_specs/kbert_sample/make_sample.py``.

Label = whether the city in the sentence is a capital (``capital``) or not (``other``). The
text never says so; the sample KG does (``capital_of`` triples). Dev cities never occur in
train, so a model can only generalise through the injected ``capital of ...`` branches.
"""

from __future__ import annotations

from pathlib import Path

TEMPLATES = [
    "The delegation arrived in {} on Monday morning.",
    "We spent three quiet days walking around {}.",
    "Her cousin found a small flat in {} last year.",
    "The train to {} was delayed by the snow.",
    "A new museum opened in {} this spring.",
    "They met for coffee near the station in {}.",
    "The conference will be held in {} next autumn.",
    "He still remembers the old bridges of {}.",
]
TRAIN = {
    "capital": ["Paris", "Vienna", "Budapest", "Athens", "London", "Tokyo", "Warsaw"],
    "other": ["Geneva", "Munich", "Cambridge", "Oxford", "Florence", "Kyoto"],
}
DEV = {
    "capital": ["Bratislava", "Belgrade", "Khartoum"],
    "other": ["Salzburg", "Barcelona", "Milan"],
}


def _rows(cities: dict[str, list[str]]) -> list[str]:
    rows = []
    for t, template in enumerate(TEMPLATES):
        for label, names in cities.items():
            for c, city in enumerate(names):
                if (t + c) % 2 == 0 or len(names) < 5:  # thin out train, keep labels balanced
                    rows.append(f"{label}\t{template.format(city)}")
    return rows


def main() -> None:
    here = Path(__file__).resolve().parent
    for name, cities in (("train", TRAIN), ("dev", DEV)):
        lines = ["label\ttext_a", *_rows(cities)]
        (here / f"{name}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
