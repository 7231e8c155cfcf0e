#!/usr/bin/env python3
"""Writes data/tiny-corpus.txt: about 300 KB of simple English prose for live CPU runs.

Generated from a small grammar with a fixed linear congruential generator, so the same text comes
out on every machine and Python version; no download, no copyright. Run it from anywhere:
    python3 data/make_corpus.py
"""
import os

WORDS = {
    "name": ["Ada", "Boris", "Clara", "Dmitri", "Elena", "Farid", "Grace", "Hugo", "Irene", "Jonas",
             "Kira", "Leon", "Mara", "Nils", "Olga", "Pavel", "Rosa", "Samir", "Tilda", "Viktor"],
    "animal": ["fox", "heron", "badger", "owl", "hare", "wolf", "otter", "crow", "deer", "lynx"],
    "place": ["the old mill", "the river bank", "the market square", "the northern hills", "the library",
              "the harbour", "the orchard", "the station", "the forest edge", "the lighthouse"],
    "time": ["At dawn", "In the evening", "Before the rain", "After supper", "On market day",
             "Late at night", "In early spring", "When the bells rang", "During the long winter",
             "At noon"],
    "adj": ["quiet", "bright", "tired", "curious", "patient", "clever", "cold", "gentle", "brave", "small"],
    "object": ["a lantern", "a map", "a letter", "a basket of apples", "an old clock", "a wooden box",
               "a loaf of bread", "a silver key", "a book of songs", "a bundle of wood"],
    "verb": ["carried", "found", "repaired", "sold", "painted", "lost", "hid", "opened", "counted",
             "described"],
    "motion": ["walked to", "ran toward", "rode past", "returned to", "waited near", "climbed above",
               "sailed from", "wandered through"],
    "feeling": ["glad", "worried", "surprised", "calm", "hopeful", "uneasy", "proud", "amused"],
}
TEMPLATES = [
    "{time}, {name} {motion} {place} with {object}.",
    "The {adj} {animal} watched {name} from {place}.",
    "{name} {verb} {object} and felt {feeling}.",
    "\"Have you seen {object}?\" asked {name}. \"It was near {place}.\"",
    "{time}, the {adj} {animal} {motion} {place}.",
    "Nobody knew why {name} {verb} {object} at {place}.",
    "{name} said that the {animal} was {adj} but never {feeling}.",
    "There were {count} {animal}s at {place}, and {name} counted them twice.",
    "{name} and {name2} {motion} {place} and talked until it was dark.",
    "If the {animal} is {adj}, {name} will bring {object} tomorrow.",
]
COUNTS = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]


class Lcg:
    """Numerical Recipes' 32-bit LCG: tiny and the same everywhere."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFF

    def below(self, n):
        self.state = (1664525 * self.state + 1013904223) & 0xFFFFFFFF
        return (self.state >> 8) % n


def main():
    rng = Lcg(20240520)
    pick = lambda key: WORDS[key][rng.below(len(WORDS[key]))]
    paragraphs, size = [], 0
    while size < 300_000:
        sentences = []
        for _ in range(3 + rng.below(5)):
            t = TEMPLATES[rng.below(len(TEMPLATES))]
            s = t.format(time=pick("time"), name=pick("name"), name2=pick("name"), motion=pick("motion"),
                         place=pick("place"), object=pick("object"), adj=pick("adj"), animal=pick("animal"),
                         verb=pick("verb"), feeling=pick("feeling"), count=COUNTS[rng.below(len(COUNTS))])
            sentences.append(s)
        p = " ".join(sentences)
        paragraphs.append(p)
        size += len(p) + 2
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny-corpus.txt")
    with open(out, "w", encoding="ascii") as f:
        f.write("\n\n".join(paragraphs) + "\n")


if __name__ == "__main__":
    main()
