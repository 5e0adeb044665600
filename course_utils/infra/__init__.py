"""Infrastructure every layer may use: durable storage (``storage``), argument checks (``checks``), notebook
setup (``notebook``), the number boxes' parser (``numbers``) and the quiz engine with its banks (``quiz``,
``quizzes/``). Imports nothing else from ``course_utils``."""
