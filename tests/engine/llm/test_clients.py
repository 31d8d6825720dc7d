"""The model clients a worker keeps: one per thread, sharing what is safe and costly to build."""
import threading

from runs.engine.llm import clients as llm_clients


def _clients_in_new_threads(count, *args, **kwargs):
    made = []

    def make():
        made.append(llm_clients.client_for(*args, **kwargs))

    threads = [threading.Thread(target=make) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return made


def test_each_thread_has_its_own_client_but_all_share_one_tls_context():
    # Building a TLS context loads the CA bundle (tens of ms of CPU): a burst of new runs on new
    # threads paid it once per thread before.
    clients = _clients_in_new_threads(3, "https://models.example.invalid/v1", "key")
    assert len({id(c) for c in clients}) == 3
    contexts = {id(c._client._transport._pool._ssl_context) for c in clients}
    assert len(contexts) == 1


def test_the_no_retry_client_is_kept_and_shares_the_thread_connection_pool():
    base = llm_clients.client_for("https://models.example.invalid/v1", "key")
    no_retry = llm_clients.client_for("https://models.example.invalid/v1", "key", retries=False)
    assert no_retry.max_retries == 0
    assert no_retry is llm_clients.client_for("https://models.example.invalid/v1", "key", retries=False)
    assert no_retry._client is base._client
