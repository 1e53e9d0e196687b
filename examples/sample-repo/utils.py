def calculate_metrics(values):
    t = 0
    for v in values:
        t = t + v
    m = t / len(values)
    s = 0
    for v in values:
        s = s + (v - m) * (v - m)
    return {"total": t, "mean": m, "variance": s / len(values)}
