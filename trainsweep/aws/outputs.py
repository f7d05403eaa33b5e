"""Names of the stack outputs the CLI and local mode read (``describe-stacks`` -> Outputs)."""

STACK_NAME = "Trainsweep"
STATE_MACHINE_ARN = "StateMachineArn"
BUCKET_NAME = "BucketName"
TOPIC_ARN = "TopicArn"
TRAINING_ROLE_ARN = "TrainingRoleArn"
TRAINING_IMAGE_URI = "TrainingImageUri"
PARSE_FAILURE_QUEUE_URL = "ParseFailureQueueUrl"
