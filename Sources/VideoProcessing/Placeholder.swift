// VideoProcessing
