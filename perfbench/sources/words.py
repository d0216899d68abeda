"""Word pools per language, and seeded filler text made from them.

The text has no meaning; what matters is that it is written in the language's script with
the language's usual words, so a tokenizer splits it as it splits real text of that language
(Chinese and Japanese take several times the tokens per character of English), and language
detection and the per-language tables see the language asked. Chinese and Japanese are
written without spaces and with their own punctuation."""

from __future__ import annotations

import random
from dataclasses import dataclass

_EN = """
time year people way day man thing woman life child world school state family student group
country problem hand part place case week company system program question work government
number night point home water room mother area money story fact month lot right study book
eye job word business issue side kind head house service friend father power hour game line
end member law car city community name president team minute idea kid body information back
parent face others level office door health person art war history party result change
morning reason research girl guy moment air teacher force education good new first last long
great little own other old big high different small large next early young important few
public bad same able make know take see come think look want give use find tell ask seem feel
try leave call keep let begin show hear play run move live believe hold bring happen write
provide sit stand lose pay meet include continue set learn lead understand watch follow stop
create speak read allow add spend grow open walk win offer remember love consider appear buy
"""

_ES = """
tiempo año gente día hombre cosa mujer vida niño mundo escuela estado familia estudiante grupo
país problema mano parte lugar caso semana empresa sistema programa pregunta trabajo gobierno
número noche punto casa agua habitación madre zona dinero historia hecho mes libro ojo negocio
lado cabeza servicio amigo padre poder hora juego línea final miembro ley coche ciudad nombre
presidente equipo minuto idea cuerpo información fiesta resultado cambio mañana razón
investigación chica momento aire profesor fuerza educación bueno nuevo primero último largo
grande pequeño propio otro viejo alto diferente próximo joven importante público malo mismo
capaz hacer saber tomar ver venir pensar mirar querer dar usar encontrar decir pedir parecer
sentir tratar dejar llamar empezar mostrar oír jugar correr vivir creer llevar pasar escribir
sentarse perder pagar incluir seguir aprender entender leer añadir crecer abrir ganar ofrecer
recordar amar considerar comprar también según después además niña corazón canción árbol
"""

# Common characters; words of one to three of them are drawn, as Chinese text mixes them.
_ZH = (
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过"
    "家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所"
    "本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全"
    "工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教"
    "西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性"
    "通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲"
)

_JA = """
私 今日 明日 時間 会社 仕事 学校 先生 学生 友達 家族 電車 駅 天気 東京 日本 世界 問題 意味
言葉 気持ち 場所 自分 子供 社会 文化 経済 技術 研究 情報 結果 方法 理由 説明 準備 予定 旅行
料理 音楽 映画 写真 毎日 季節 春 夏 秋 冬 山 川 海 空 花 雨 雪 道 町 店 部屋 窓 机 本 手紙
コーヒー テレビ パソコン ニュース システム データ サービス プログラム メール ホテル
です ます でした ました しています になります と思います かもしれません ですね でしょう
"""

_JA_PARTICLES = ("は", "が", "を", "に", "で", "と", "の", "も", "から", "まで")


@dataclass(frozen=True)
class _Pool:
    words: tuple[str, ...]
    spaced: bool  # words are separated by spaces
    comma: str
    stop: str
    pad: str  # a common word of one token, to make up a token a cut could not


def _zh_words() -> tuple[str, ...]:
    # Every character alone, and a fixed set of pairs: pairs are what Chinese words mostly
    # are, and the tokenizer merges frequent ones into one token.
    pairs = tuple(_ZH[i : i + 2] for i in range(0, len(_ZH) - 1, 2))
    return (*_ZH, *pairs)


POOLS = {
    "en": _Pool(tuple(_EN.split()), True, ",", ".", " the"),
    "es": _Pool(tuple(_ES.split()), True, ",", ".", " de"),
    "zh": _Pool(_zh_words(), False, "，", "。", "的"),
    "ja": _Pool(tuple(_JA.split()), False, "、", "。", "は"),
}
LANGUAGES = tuple(POOLS)


def sentence(language: str, rng: random.Random) -> str:
    """One sentence of 6 to 14 words, with commas."""
    pool = POOLS[language]
    count = rng.randint(6, 14)
    words = []
    for i in range(count):
        word = rng.choice(pool.words)
        if language == "ja" and i < count - 1 and rng.random() < 0.5:
            word += rng.choice(_JA_PARTICLES)  # Japanese joins its nouns with particles
        words.append(word)
    if pool.spaced:
        words[0] = words[0].capitalize()
    # Chinese and Japanese break a sentence with commas more often than Western languages
    # put spaces: without them a sentence is one long run of letters, which the tokenizer's
    # byte-pair merging takes in time quadratic in the run's length.
    every = 3 if not pool.spaced else 8
    for at in range(every, count - 1, every):
        words[at - 1] += pool.comma
    joiner = " " if pool.spaced else ""
    return joiner.join(words) + pool.stop


def joined(language: str, sentences: list[str]) -> str:
    return (" " if POOLS[language].spaced else "").join(sentences)
