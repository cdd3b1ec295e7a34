// Replaced by the model layer (issue 4).
